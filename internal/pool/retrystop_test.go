package pool

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/internal/process"
)

// counting is a rand.Source of 0, 1, 2, ...: small draws, so that
// Between(d) is d/2 exactly (no jitter), and receive attempt ids differ.
type counting struct{ n atomic.Uint64 }

func (c *counting) Uint64() uint64 { return c.n.Add(1) - 1 }

// TestARetryInPlaceDueAfterTheStopGoesBackWithItsDelay: Run's context
// ends while a message waits out a retry in place, and its timer fires
// while Run has not yet closed stopCh (its log line takes a second).
// Shutdown began first: the message goes back to SQS with its delay, as a
// stop that closed stopCh in time would send it, not at once (visibility
// 0) through the lane's stop. It does not run again either way: the lane
// it is put back into checks Run's context before it starts anything
// (TestAStopWinsTheSlotItFrees).
func TestARetryInPlaceDueAfterTheStopGoesBackWithItsDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		b := setup(t, options{config: func(c *Config) {
			c.RetryInPlace = 1
			c.RetryBase, c.RetryMax = 2*time.Second, 2*time.Second // in place after 1 s
			c.Rand = jitter.New(&counting{})
			c.Log = slog.New(slowStopLine{c.Log.Handler()})
		}})
		b.proc.ProcessFunc = func(context.Context, effect.Message, process.Hooks) process.Result {
			if ran.Add(1) == 1 {
				go func() {
					time.Sleep(500 * time.Millisecond) // the retry is due in 1 s
					b.cancel()
				}()
				return process.Result{Action: process.Retry, Outcome: dedup.Won, Err: errors.New("downstream unavailable")}
			}
			return deleted()
		}
		b.send(t, "a")
		b.start(t)
		time.Sleep(time.Minute)
		b.stop(t)
		require.Equal(t, int32(1), ran.Load(), "the retry ran after its process began to stop")
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		require.NotEmpty(t, b.rec.changes)
		last := b.rec.changes[len(b.rec.changes)-1]
		require.Equal(t, int32(1), aws.ToInt32(&last.VisibilityTimeout), "handed back with the retry's delay")
		require.Contains(t, b.logs.String(), "retry in place given up for shutdown", "the log does not leave the retry promised")
	})
}
