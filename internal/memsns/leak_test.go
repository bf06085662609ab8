package memsns_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine they started is
// still running once they are done: every goroutine has an owner and an exit.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
