package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the harness run the test binary as its `bench consume`
// processes (it runs os.Executable), as cmd/bench does; otherwise it runs
// the tests and fails them when any goroutine they started is still running
// once they are done: every goroutine has an owner and an exit.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "consume" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := Consume(ctx, os.Args[2:], os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench consume:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
