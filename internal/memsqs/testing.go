package memsqs

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// NewQueue is testenv.NewQueue for a Server: it creates a queue (FIFO when
// fifo) with VisibilityTimeout 30 and attrs, plus a dead-letter queue with
// maxReceiveCount when maxReceive > 0, and deletes them when the test ends.
func NewQueue(t testing.TB, s *Server, fifo bool, attrs map[string]string, maxReceive int) (url, dlqURL string) {
	t.Helper()
	return testenv.NewQueue(t, s, fifo, attrs, maxReceive)
}
