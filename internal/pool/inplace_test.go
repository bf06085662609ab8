package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// failFirst returns a processor that fails body's first n runs retryably
// (the effect failed after a won claim) and deletes everything else.
func failFirst(tr *tracker, body string, n int32) func(context.Context, effect.Message, process.Hooks) process.Result {
	var fails atomic.Int32
	return func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		if m.Body == body && fails.Add(1) <= n {
			return end(process.Result{Action: process.Retry, Outcome: dedup.Won, Err: errors.New("downstream unavailable")})
		}
		return end(deleted())
	}
}

// TestRetryInPlaceSparesTheGroupsReceiveCounts: a head that fails twice is
// retried in place; neither it nor the followers that came with it go back
// to SQS, so no receive count rises towards maxReceiveCount.
func TestRetryInPlaceSparesTheGroupsReceiveCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, config: func(c *Config) { c.RetryInPlace = 2 }})
	tr := newTracker(6)
	b.proc.ProcessFunc = failFirst(tr, "a1", 2)
	b.sendFIFO(t, "A", "a1", "a2", "a3")
	b.sendFIFO(t, "B", "b1", "b2", "b3")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "all messages")

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"a1", "a1", "a1", "a2", "a3"}, tr.order["A"])
		require.Equal(t, []string{"b1", "b2", "b3"}, tr.order["B"])
		require.Equal(t, []int{1, 1, 1}, tr.receiveCounts["a1"], "retried in place, never received again")
		require.Equal(t, []int{1}, tr.receiveCounts["a2"])
		require.Equal(t, []int{1}, tr.receiveCounts["a3"])
	})
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	for _, e := range b.rec.changes {
		require.NotZero(t, e.VisibilityTimeout, "nothing handed back")
	}
}

// TestRetryInPlaceEndsAfterItsBudget: past RetryInPlace the message goes back
// to SQS with backoff and the rest of its group is handed back, as without.
func TestRetryInPlaceEndsAfterItsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, config: func(c *Config) { c.RetryInPlace = 1 }})
	tr := newTracker(2)
	b.proc.ProcessFunc = failFirst(tr, "a1", 2)
	b.sendFIFO(t, "A", "a1", "a2")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "all messages")

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"a1", "a1", "a1", "a2"}, tr.order["A"])
		require.Equal(t, []int{1, 1, 2}, tr.receiveCounts["a1"], "one retry in place, then back to SQS")
		require.Equal(t, []int{2}, tr.receiveCounts["a2"], "handed back with its head")
	})
}

// TestOthersClaimsAreNotRetriedInPlace: another worker's live lease, or a
// lease taken over while the effect ran, is left to SQS, not waited out by
// holding the group.
func TestOthersClaimsAreNotRetriedInPlace(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]process.Result{
		"busy":       {Action: process.Retry, Outcome: dedup.Busy, After: time.Millisecond},
		"lease lost": {Action: process.Retry, Outcome: dedup.Won, LeaseLost: true, Err: dedup.ErrLeaseLost},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{fifo: true, config: func(c *Config) { c.RetryInPlace = 3 }})
			tr := newTracker(1)
			var once atomic.Bool
			b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
				end := tr.begin(m)
				if once.CompareAndSwap(false, true) {
					return end(r)
				}
				return end(deleted())
			}
			b.sendFIFO(t, "A", "a1")
			b.start(t)
			waitFor(t, tr.allDone, 10*time.Second, "a1")
			tr.snapshot(func(tr *tracker) {
				require.Equal(t, []int{1, 2}, tr.receiveCounts["a1"], "back through SQS")
			})
		})
	}
}

// TestShutdownEndsARetryInPlace: a message waiting to be retried in place
// goes back to SQS with its delay when shutdown begins, at once; the rest of
// its group goes back with visibility 0.
func TestShutdownEndsARetryInPlace(t *testing.T) {
	t.Parallel()
	const delay = time.Hour
	b := setup(t, options{fifo: true, config: func(c *Config) {
		c.RetryInPlace = 3
		c.RetryBase, c.RetryMax = delay, delay
	}})
	failed := make(chan struct{})
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		if m.Body == "a1" {
			close(failed)
			return process.Result{Action: process.Retry, Outcome: dedup.Won, After: delay, Err: errors.New("later")}
		}
		t.Errorf("%s must not run before a1 succeeds", m.Body)
		return deleted()
	}
	b.sendFIFO(t, "A", "a1", "a2")
	b.start(t)
	waitFor(t, failed, 5*time.Second, "a1 to fail")
	at := time.Now()
	b.stop(t)
	require.Less(t, time.Since(at), 10*time.Second, "shutdown does not wait out the delay")

	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	var vis []int32
	for _, e := range b.rec.changes {
		vis = append(vis, e.VisibilityTimeout)
	}
	require.ElementsMatch(t, []int32{int32(delay / time.Second), 0}, vis, "a1 with its delay, a2 at once")
}

// TestIdlePoolSendsItsAcksAtOnce: with nothing else held, a delete does not
// wait out the ack delay (an hour here), which would hold the group's next
// receive back; the group's messages follow one another promptly.
func TestIdlePoolSendsItsAcksAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, config: func(c *Config) { c.AckDelay = time.Hour; c.Concurrency = 1 }})
	tr := newTracker(3)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		return tr.begin(m)(deleted())
	}
	b.start(t)
	for _, body := range []string{"a1", "a2", "a3"} {
		b.sendFIFO(t, "A", body)
		// The next send comes after the previous message was deleted: each
		// is received alone, and its delete makes the pool idle.
		eventually(t, 10*time.Second, func() bool { v, nv := b.counts(t, b.url); return v+nv == 0 }, body+" deleted")
	}
	waitFor(t, tr.allDone, 10*time.Second, "all three")
	tr.snapshot(func(tr *tracker) { require.Equal(t, []string{"a1", "a2", "a3"}, tr.order["A"]) })
}

// slowObserver stalls the lane after its first permanent failure, long
// enough for the failed message, visible again, to be received anew.
type slowObserver struct {
	testObserver
	once atomic.Bool
}

func (o *slowObserver) Done(_ string, r process.Result, _ time.Duration) {
	if r.Action == process.Fail && o.once.CompareAndSwap(false, true) {
		time.Sleep(300 * time.Millisecond)
	}
}

// TestAFreshDeliveryIsNotHandedBack: when a failed FIFO message goes back to
// SQS, only what waited behind it goes back too. The message itself may be
// received again before its lane is done with the failure; that delivery
// runs. (Handed back unstarted, it would spend a receive for nothing and
// reach maxReceiveCount a run early.)
func TestAFreshDeliveryIsNotHandedBack(t *testing.T) {
	t.Parallel()
	obs := &slowObserver{}
	b := setup(t, options{fifo: true, maxReceive: 3, config: func(c *Config) { c.Observer = obs }})
	tr := newTracker(0)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		return tr.begin(m)(process.Result{Action: process.Fail, Err: effect.Permanent(errors.New("bad body"))})
	}
	b.sendFIFO(t, "A", "poison")
	b.start(t)
	eventually(t, 10*time.Second, func() bool { v, _ := b.counts(t, b.dlq); return v == 1 }, "the poison message in the DLQ")
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []int{1, 2, 3}, tr.receiveCounts["poison"], "run at every receive")
	})
}
