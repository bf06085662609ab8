package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// receiveErrors counts what the pool reports as failed receives.
type receiveErrors struct {
	*testObserver
	n atomic.Int32
}

func (r *receiveErrors) ReceiveError(string, error) { r.n.Add(1) }

// stopWithin cancels Run's context and reports how long, in virtual time,
// Run took to return (failing past limit).
func stopWithin(t *testing.T, b *testBundle, limit time.Duration) time.Duration {
	t.Helper()
	at := time.Now()
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(limit):
		t.Fatalf("Run did not return within %s of the stop", limit)
	}
	return time.Since(at)
}

// TestAnIdleStopEndsItsOpenLongPollsAtOnce: a worker with nothing to do has
// its long polls open (20 s) when it is stopped. It stops well within a
// second instead of waiting for them, on a FIFO and a standard queue, and
// hides nothing (nothing was sent).
func TestAnIdleStopEndsItsOpenLongPollsAtOnce(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{true, false} {
		t.Run(map[bool]string{true: "fifo", false: "standard"}[fifo], func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setup(t, options{fifo: fifo, config: func(c *Config) { c.WaitTime = 20 * time.Second }})
				b.start(t)
				time.Sleep(3 * time.Second) // the polls are open, 17 s left of their wait
				synctest.Wait()
				b.rec.mu.Lock()
				open := b.rec.receiving
				b.rec.mu.Unlock()
				require.Equal(t, 2, open, "every receiver is in a long poll") // ReceiversFor(8)
				took := stopWithin(t, b, 30*time.Second)
				require.Less(t, took, 100*time.Millisecond, "an idle stop does not wait for its long polls")
				v, nv := b.counts(t, b.url)
				require.Zero(t, v+nv)
			})
		})
	}
}

// TestAFIFOPollTakenAsTheStopCameIsHandedBackAtOnce: the poll open at an
// idle stop had just taken a group's messages (SQS handed them out; the
// answer had not come). The stop abandons it at once, asks again with its
// attempt id and hands what comes back: visible again at once, in group
// order, the group not held, and nothing ran.
func TestAFIFOPollTakenAsTheStopCameIsHandedBackAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, l := stopDuringLostAnswer(t, nil)
		took := stopWithin(t, b, 30*time.Second)
		require.Less(t, took, 100*time.Millisecond, "the stop does not wait for the poll")
		require.Equal(t, int32(1), l.retries.Load(), "one receive with the abandoned poll's attempt id")
		v, nv := b.counts(t, b.url)
		require.Zero(t, nv, "nothing left hidden")
		require.Equal(t, 3, v)
		var names []string
		for _, m := range b.receiveNow(t, b.url) {
			names = append(names, aws.ToString(m.Body))
		}
		require.Equal(t, []string{"a1", "a2", "a3"}, names, "the group is not held: all of it at once, in order")
		require.Contains(t, b.logs.String(), "got back what it took")
	})
}

// TestAnIdleStopWhoseAttemptIDIsRefusedEndsAndCountsIt: SQS refuses the
// abandoned poll's attempt id as not retryable. The stop still ends at
// once; the refusal is counted as a failed receive and logged with what
// stays hidden and for how long.
func TestAnIdleStopWhoseAttemptIDIsRefusedEndsAndCountsIt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("InvalidParameterValue: The receiveRequestAttemptId is not valid anymore since the receive call is not retryable")
		b, l := stopDuringLostAnswer(t, refused)
		obs := b.cfg.Observer.(*receiveErrors)
		took := stopWithin(t, b, 30*time.Second)
		require.Less(t, took, 100*time.Millisecond)
		require.Equal(t, int32(1), l.retries.Load(), "asked once, not again and again")
		require.Equal(t, int32(1), obs.n.Load(), "the refusal is counted")
		_, nv := b.counts(t, b.url)
		require.Equal(t, 3, nv, "hidden: SQS would not give them back")
		logs := b.logs.String()
		require.Contains(t, logs, "cannot be asked back")
		require.Contains(t, logs, "hidden_up_to_ms=30000")
		require.Contains(t, logs, "not retryable")
	})
}

// stopDuringLostAnswer starts an idle FIFO pool whose first receive, of
// group A's three messages, loses its answer; the caller stops it.
func stopDuringLostAnswer(t *testing.T, refuse error) (*testBundle, *losingSQS) {
	// One receiver: another one's poll, abandoned too, would go on inside
	// the queue (as on SQS) and could take what this stop hands back
	// (the bound README states).
	b := setup(t, options{fifo: true, queue: func(q *Queue) { q.Receivers = 1 },
		config: func(c *Config) { c.WaitTime = 20 * time.Second }})
	b.cfg.Observer = &receiveErrors{testObserver: b.obs}
	l := &losingSQS{SQS: b.rec, refuse: refuse}
	b.cfg.Client = l
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		t.Errorf("%s ran: its receive's answer was lost", m.Body)
		return deleted()
	}
	b.start(t)
	synctest.Wait()
	b.sendFIFO(t, "A", "a1", "a2", "a3")
	synctest.Wait() // the poll took them; its answer waits for the cancel
	require.True(t, l.lost.Load())
	return b, l
}

// TestABusyStopStillWaitsForItsLongPolls: a queue whose messages the pool
// holds at the stop (one runs, two wait behind it) keeps its open polls:
// the two go back when they have returned, so no abandoned poll can take
// them, and a message sent after the stop is brought back by the poll and
// handed back too.
func TestABusyStopStillWaitsForItsLongPolls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, config: func(c *Config) { c.WaitTime = 10 * time.Second }})
		release := make(chan struct{})
		var ran atomic.Int32
		b.proc.ProcessFunc = func(context.Context, effect.Message, process.Hooks) process.Result {
			ran.Add(1)
			<-release
			return deleted()
		}
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		b.start(t)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, int32(1), ran.Load())
		at := time.Now()
		b.cancel()
		synctest.Wait()
		b.sendFIFO(t, "B", "late")
		close(release)
		<-b.done
		require.GreaterOrEqual(t, time.Since(at), time.Second, "Run waited for its open polls")
		v, nv := b.counts(t, b.url)
		require.Zero(t, nv, "nothing hidden")
		require.Equal(t, 3, v, "a2, a3 and the late message are visible again")
	})
}

// TestWhatAnAbandonedPollTakesAfterTheStopIsHiddenAtMostItsVisibility: the
// bound README states. A message sent just after an idle stop may be taken
// by a poll SQS goes on serving: it is hidden, for no longer than the
// receive's visibility timeout, and then received as any other.
func TestWhatAnAbandonedPollTakesAfterTheStopIsHiddenAtMostItsVisibility(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, config: func(c *Config) { c.WaitTime = 20 * time.Second }})
		b.start(t)
		time.Sleep(time.Second)
		synctest.Wait()
		stopWithin(t, b, 30*time.Second)
		b.sendFIFO(t, "A", "late")
		synctest.Wait()
		_, nv := b.counts(t, b.url)
		require.Equal(t, 1, nv, "taken by a poll SQS went on serving")
		time.Sleep(30 * time.Second) // the receive's visibility (Queue.Visibility)
		v, nv := b.counts(t, b.url)
		require.Equal(t, []int{1, 0}, []int{v, nv}, "visible again after the visibility timeout")
	})
}
