package localstack_test

import (
	"fmt"
	"os"
	"testing"
)

// The tests read localstack/ by paths relative to it (docker-compose.yml,
// init/ready.d/*): they run from there.
const localstackDir = "../../../localstack"

func TestMain(m *testing.M) {
	if err := os.Chdir(localstackDir); err != nil {
		fmt.Fprintf(os.Stderr, "cannot enter %s: %v\n", localstackDir, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
