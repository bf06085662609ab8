package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(testenv.ChildEnv) == "1" {
		main() // the README's example, as a user runs it
		return
	}
	os.Exit(m.Run())
}

// TestIdleStopOnTheLocalStack measures what README.md says of Ctrl-C: the
// README's example, idle on an empty queue of the local stack (fauxqs),
// its long polls open, stopped with SIGINT. It reports the time to exit
// (README.md quotes the figures) and checks that the program exits
// cleanly, without waiting out its long poll, and leaves nothing in flight.
func TestIdleStopOnTheLocalStack(t *testing.T) {
	sqsc, db := testenv.SQS(t), testenv.DynamoDB(t)
	testenv.EnsureTable(t, db, "exactly-dedup")
	for _, fifo := range []bool{true, false} {
		url, _ := testenv.NewQueue(t, sqsc, fifo, nil, 0)
		var took []time.Duration
		for range 3 {
			d := testenv.IdleStop(t, nil, []string{"ORDERS_QUEUE_URL=" + url}, "commit mode", 3*time.Second)
			// Only a stop that waited for its 20 s long poll takes longer.
			require.Less(t, d, exactly.DefaultWaitTime/2, "the idle stop waited for its long polls")
			took = append(took, d)
			testenv.RequireNothingInFlight(t, sqsc, url)
		}
		t.Logf("fifo=%v: idle stop took %v (median %v)", fifo, took, testenv.Median(took))
	}
}
