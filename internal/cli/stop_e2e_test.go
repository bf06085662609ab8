package cli_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestIdleStopIsPrompt: `worker run`, idle on an empty FIFO queue and an
// empty standard queue with the default 20 s long polls open, exits on
// SIGTERM without waiting its polls out (they are abandoned; issue 33),
// and leaves nothing in flight. It logs the time to exit (docs/OPERATE.md
// quotes the figures); the bound checked is half the wait time, which
// only a stop that waited for a poll to return can pass.
func TestIdleStopIsPrompt(t *testing.T) {
	sqsc := testenv.SQS(t)
	_, fifo, table := newQueueAndTable(t, "idlestop")
	std, _ := testenv.NewQueue(t, sqsc, false, nil, 0)
	var took []time.Duration
	for range 3 {
		w := startWorker(t, "run", "--queue", fifo, "--queue", std, "--table", table, "--effect", "noop",
			"--metrics-addr", "127.0.0.1:0", "--progress", "0")
		readyAddr(t, w)
		time.Sleep(time.Second) // the receivers' long polls are open
		at := time.Now()
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-w.done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("worker did not exit within a minute of SIGTERM")
		}
		d := time.Since(at)
		require.Less(t, d, pool.DefaultWaitTime/2, "an idle stop waited for its long polls")
		took = append(took, d)
		testenv.RequireNothingInFlight(t, sqsc, fifo)
		testenv.RequireNothingInFlight(t, sqsc, std)
	}
	t.Logf("idle stop of worker run took %v (median %v)", took, testenv.Median(took))
}
