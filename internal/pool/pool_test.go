package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

func TestFIFOGroupsRunInOrderAndInParallel(t *testing.T) {
	t.Parallel()
	const groups, perGroup, concurrency = 20, 20, 8
	b := setup(t, options{fifo: true, config: func(c *Config) { c.Concurrency = concurrency }})
	tr := newTracker(groups * perGroup)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		time.Sleep(time.Millisecond) // some work, so that groups overlap
		return end(deleted())
	}
	want := map[string][]string{}
	for g := range groups {
		group := fmt.Sprintf("g%02d", g)
		want[group] = bodies(group+"-", perGroup)
	}
	// Interleave the groups, as producers would.
	for i := range perGroup {
		for g := range groups {
			group := fmt.Sprintf("g%02d", g)
			b.sendFIFO(t, group, want[group][i])
		}
	}
	b.start(t)
	waitFor(t, tr.allDone, 20*time.Second, "all messages")
	b.stop(t)

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, want, tr.order, "each group in order, each message once")
		require.Equal(t, 1, tr.maxGroupRunning, "one message of a group at a time")
		require.Greater(t, tr.maxRunning, 1, "groups run in parallel")
		require.LessOrEqual(t, tr.maxRunning, concurrency)
	})
	v, nv := b.counts(t, b.url)
	require.Equal(t, 0, v+nv, "all deleted")
	require.Zero(t, b.obs.batchFailed.Load())
}

func TestStandardQueueRunsFullyParallel(t *testing.T) {
	t.Parallel()
	const n, concurrency = 30, 10
	b := setup(t, options{config: func(c *Config) { c.Concurrency = concurrency }})
	tr := newTracker(n)
	gate := make(chan struct{})
	var once sync.Once
	b.proc.ProcessFunc = func(ctx context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		tr.snapshot(func(tr *tracker) {
			if tr.running == concurrency {
				once.Do(func() { close(gate) })
			}
		})
		// The first handlers wait until Concurrency of them run at once:
		// this only ends if the pool runs them in parallel.
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return end(deleted())
	}
	b.send(t, bodies("m", n)...)
	b.start(t)
	waitFor(t, gate, 10*time.Second, "Concurrency handlers running at once")
	waitFor(t, tr.allDone, 10*time.Second, "all messages")
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, concurrency, tr.maxRunning)
		require.Len(t, tr.runs, n)
	})
}

func TestSeveralQueuesWithTheirOwnSettings(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true})
	std, _ := memsqs.NewQueue(t, b.sqs, false, nil, 0)
	b.cfg.Queues = append(b.cfg.Queues, Queue{URL: std, Visibility: 10 * time.Second, Receivers: 1})
	var mu sync.Mutex
	seen := map[string]string{}
	all := make(chan struct{})
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, h process.Hooks) process.Result {
		mu.Lock()
		defer mu.Unlock()
		seen[m.Body] = m.QueueName
		if m.QueueURL == std {
			assert.Equal(t, DefaultLease(10*time.Second)/2, h.HeartbeatEvery, "from the queue's own visibility")
		}
		if len(seen) == 6 {
			close(all)
		}
		return deleted()
	}
	b.sendFIFO(t, "g", "f1", "f2", "f3")
	for _, body := range []string{"s1", "s2", "s3"} {
		_, err := b.sqs.SendMessage(context.Background(), sqsSend(std, body))
		require.NoError(t, err)
	}
	b.start(t)
	waitFor(t, all, 10*time.Second, "messages of both queues")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, sqsmsg.QueueName(b.url), seen["f1"])
	require.Equal(t, sqsmsg.QueueName(std), seen["s1"])
}

func TestRetryHoldsBackTheRestOfItsGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true})
	tr := newTracker(8)
	var failed atomic.Bool
	retried := make(chan time.Time, 1)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		if m.Body == "a3" && failed.CompareAndSwap(false, true) {
			retried <- time.Now()
			return end(process.Result{Action: process.Retry, After: time.Millisecond, Err: errors.New("try again")})
		}
		return end(deleted())
	}
	b.sendFIFO(t, "A", "a1", "a2", "a3", "a4", "a5")
	b.sendFIFO(t, "B", "b1", "b2", "b3")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "all messages")

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"a1", "a2", "a3", "a3", "a4", "a5"}, tr.order["A"], "a4 and a5 wait for a3 to succeed")
		require.Equal(t, []string{"b1", "b2", "b3"}, tr.order["B"])
		require.Equal(t, []int{1, 2}, tr.receiveCounts["a3"])
		// a4 and a5 came with a3's batch, were handed back unstarted, and
		// came again after a3's retry.
		require.Equal(t, []int{2}, tr.receiveCounts["a4"])
		require.Equal(t, []int{2}, tr.receiveCounts["a5"])
	})
}

func TestPermanentFailureIsLeftToRedrive(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, maxReceive: 3})
	tr := newTracker(2)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		if m.Body == "poison" {
			return end(process.Result{Action: process.Fail, Err: effect.Permanent(errors.New("bad body"))})
		}
		return end(deleted())
	}
	b.sendFIFO(t, "A", "poison")
	b.sendFIFO(t, "B", "b1", "b2")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "group B")
	eventually(t, 10*time.Second, func() bool {
		v, _ := b.counts(t, b.dlq)
		return v == 1
	}, "the poison message in the DLQ")
	b.stop(t)

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"poison", "poison", "poison"}, tr.order["A"], "tried maxReceiveCount times")
		require.Equal(t, []string{"b1", "b2"}, tr.order["B"])
	})
	dead := b.receiveNow(t, b.dlq)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", aws.ToString(dead[0].Body))
	require.Equal(t, "A", dead[0].Attributes["MessageGroupId"])
	require.Zero(t, b.rec.sends, "the queue's redrive moved it, not the pool")
	require.Contains(t, b.logs.String(), "left to the queue's redrive policy")
}

// TestRedriveTakesTheRestOfTheBatchAlong documents an SQS hazard rather than
// a wish: messages of a group that came in the same receive as a poison
// message are handed back unstarted each time, SQS counts those receives, and
// redrive dead-letters them together with it. Moving poison messages to the
// DLQ directly (Queue.DLQURL) avoids it; see TestPermanentFailureMovesToDLQ.
func TestRedriveTakesTheRestOfTheBatchAlong(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, maxReceive: 3})
	tr := newTracker(1)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		return end(process.Result{Action: process.Fail, Err: effect.Permanent(errors.New("bad body"))})
	}
	b.sendFIFO(t, "A", "poison", "next")
	b.start(t)
	eventually(t, 10*time.Second, func() bool {
		v, _ := b.counts(t, b.dlq)
		return v == 2
	}, "both messages in the DLQ")
	b.stop(t)
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"poison", "poison", "poison"}, tr.order["A"], "next never ran")
	})
}

func TestPermanentFailureMovesToDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, maxReceive: 5})
	dlq := b.dlq
	b.cfg.Queues[0].DLQURL = dlq
	tr := newTracker(1)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		if m.Body == "poison" {
			return end(process.Result{Action: process.Fail, Outcome: dedup.Conflict, Err: errors.New("conflict")})
		}
		return end(deleted())
	}
	b.sendFIFO(t, "A", "poison", "next")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "the message after the poison one")
	b.stop(t)

	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"poison", "next"}, tr.order["A"], "moved at the first failure")
		require.Equal(t, []int{1}, tr.receiveCounts["next"], "the group went on at once: not handed back, no receive counted against it")
	})
	dead := b.receiveNow(t, dlq)
	require.Len(t, dead, 1)
	m := dead[0]
	require.Equal(t, "poison", aws.ToString(m.Body))
	require.Equal(t, "A", m.Attributes["MessageGroupId"], "the group is kept")
	require.True(t, strings.HasPrefix(m.Attributes["MessageDeduplicationId"], "dlq-"), "a dedup id of its own (CopyDeduplicationID), not the source's")
	require.Equal(t, "t-A", aws.ToString(m.MessageAttributes["tenant"].StringValue), "message attributes are kept")
	require.Equal(t, "poison", aws.ToString(m.MessageAttributes["idempotency-key"].StringValue),
		"the dedup key (auto: the dedup id) is carried, so that a replay keeps it")
	v, nv := b.counts(t, b.url)
	require.Equal(t, 0, v+nv)
	logs := b.logs.String()
	require.Contains(t, logs, "level=ERROR msg=\"permanent failure: moved to the dead-letter queue\"")
	require.Contains(t, logs, "outcome=conflict")
	require.Contains(t, logs, "dlq_message_id="+aws.ToString(m.MessageId), "the copy's id, which finds it in the DLQ")
}

func TestBusySetsVisibilityToTheRemainingLease(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true})
	var calls atomic.Int32
	runs := make(chan time.Time, 2)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		runs <- time.Now()
		if calls.Add(1) == 1 {
			return process.Result{Action: process.Retry, Outcome: dedup.Busy, After: 1500 * time.Millisecond, Err: errors.New("busy")}
		}
		return deleted()
	}
	b.sendFIFO(t, "A", "m")
	b.start(t)
	first := <-runs
	var second time.Time
	select {
	case second = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the busy message did not come back")
	}
	require.GreaterOrEqual(t, second.Sub(first), 1400*time.Millisecond, "not before the other worker's lease ends")
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	require.Len(t, b.rec.changes, 1)
	require.Equal(t, int32(2), b.rec.changes[0].VisibilityTimeout, "visibility = remaining lease, in whole seconds rounded up")
}

func TestVisibilityIsExtendedWhileAHandlerRuns(t *testing.T) {
	t.Parallel()
	// The queue's visibility timeout is 1 s; the handler runs 2.5 s. Two
	// receivers poll all the time: a lapse would redeliver the message.
	b := setup(t, options{attrs: map[string]string{"VisibilityTimeout": "1"}, queue: func(q *Queue) {
		q.Visibility = time.Second
		q.Receivers = 2
	}})
	var runs atomic.Int32
	done := make(chan struct{})
	b.proc.ProcessFunc = func(_ context.Context, _ effect.Message, h process.Hooks) process.Result {
		runs.Add(1)
		assert.Equal(t, DefaultLease(time.Second)/2, h.HeartbeatEvery, "the lease is extended at half itself, a little less than the visibility timeout")
		time.Sleep(2500 * time.Millisecond) // the handler's work outlasts the visibility timeout
		close(done)
		return deleted()
	}
	b.send(t, "slow")
	b.start(t)
	waitFor(t, done, 10*time.Second, "the slow handler")
	b.stop(t)
	require.Equal(t, int32(1), runs.Load(), "no redelivery while the handler ran")
	require.Zero(t, b.obs.batchFailed.Load(), "extensions and the delete all succeeded")
	b.rec.mu.Lock()
	extensions := len(b.rec.changes)
	b.rec.mu.Unlock()
	require.GreaterOrEqual(t, extensions, 3, "extended about every half second")
	v, nv := b.counts(t, b.url)
	require.Equal(t, 0, v+nv)
}

func TestVisibilityIsExtendedWhileMessagesWaitTheirTurn(t *testing.T) {
	t.Parallel()
	// Three messages of one group arrive in one receive; each takes 0.7 s,
	// so the last starts 1.4 s after the receive, past its 1 s timeout.
	b := setup(t, options{fifo: true, attrs: map[string]string{"VisibilityTimeout": "1"}, queue: func(q *Queue) {
		q.Visibility = time.Second
	}})
	tr := newTracker(3)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		time.Sleep(700 * time.Millisecond)
		return end(deleted())
	}
	b.sendFIFO(t, "A", "a1", "a2", "a3")
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "the group")
	b.stop(t)
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"a1", "a2", "a3"}, tr.order["A"])
		require.Equal(t, []int{1}, tr.receiveCounts["a3"], "received once: its visibility never lapsed")
	})
	require.Zero(t, b.obs.batchFailed.Load(), "no delete with an expired receipt handle")
	v, nv := b.counts(t, b.url)
	require.Equal(t, 0, v+nv)
}

func TestNoReceiveAtTheInFlightCap(t *testing.T) {
	t.Parallel()
	const capacity = 3
	b := setup(t, options{queue: func(q *Queue) { q.Receivers = 2 }, config: func(c *Config) {
		c.MaxInFlight = capacity
		c.Concurrency = capacity
	}})
	release := make(chan struct{})
	var running atomic.Int32
	atCap := make(chan struct{})
	tr := newTracker(10)
	b.proc.ProcessFunc = func(ctx context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		if running.Add(1) == capacity {
			close(atCap)
		}
		<-release
		return end(deleted())
	}
	b.send(t, bodies("m", 10)...)
	b.start(t)
	waitFor(t, atCap, 5*time.Second, "the in-flight cap")

	// With the cap reached no receive may start or be under way.
	eventually(t, 5*time.Second, func() bool {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		return b.rec.receiving == 0
	}, "receives to finish")
	b.rec.mu.Lock()
	before := b.rec.receives
	b.rec.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // a window in which a receive would show
	b.rec.mu.Lock()
	after := b.rec.receives
	b.rec.mu.Unlock()
	require.Equal(t, before, after, "no ReceiveMessage while at the in-flight cap")
	v, nv := b.counts(t, b.url)
	require.Equal(t, capacity, nv, "exactly the cap is held")
	require.Equal(t, 10-capacity, v)

	close(release)
	waitFor(t, tr.allDone, 10*time.Second, "all messages once released")
	require.LessOrEqual(t, b.obs.maxInflight.Load(), int64(capacity))
}

// TestWhatAPoolHoldsWhileItsHandlersAreBusy: with its handlers busy, a
// pool on a FIFO queue whose groups have many messages waiting holds a
// receive's batch per handler and per receiver (MaxInFlightFor), so that
// every handler has a group to run; on a standard queue, where every
// message is a lane, it holds no more than 2×concurrency + 10 per
// receiver, as before. Capped at that for both, a FIFO pool ran a fifth
// of its groups at a time (0.52× a hand-written consumer at AWS-like
// latency, concurrency 16).
func TestWhatAPoolHoldsWhileItsHandlersAreBusy(t *testing.T) {
	t.Parallel()
	const conc, receivers, groups = 2, 1, 6
	for _, fifo := range []bool{true, false} {
		t.Run(fmt.Sprintf("fifo-%v", fifo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := setup(t, options{fifo: fifo, queue: func(q *Queue) { q.Receivers = receivers }, config: func(c *Config) { c.Concurrency = conc }})
				release := make(chan struct{})
				b.proc.ProcessFunc = func(context.Context, effect.Message, process.Hooks) process.Result {
					<-release
					return deleted()
				}
				for g := range groups {
					bs := bodies("g"+strconv.Itoa(g)+"-", maxBatch)
					if fifo {
						b.sendFIFO(t, "g"+strconv.Itoa(g), bs...)
					} else {
						b.send(t, bs...)
					}
				}
				b.start(t)
				synctest.Wait() // handlers blocked, receivers waiting for room
				_, held := b.counts(t, b.url)
				if fifo {
					require.Equal(t, MaxInFlightFor(conc, receivers), held, "a batch of one group per handler and per receiver")
				} else {
					require.LessOrEqual(t, held, 2*conc+maxBatch*receivers, "a standard queue's messages are lanes")
					require.GreaterOrEqual(t, held, maxBatch)
				}
				close(release)
				b.stop(t)
			})
		})
	}
}

func TestShutdownHandsBackUnstartedMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true, config: func(c *Config) { c.AckDelay = time.Hour }})
	started := make(chan struct{})
	release := make(chan struct{})
	var handlerCtxErr atomic.Value
	b.proc.ProcessFunc = func(ctx context.Context, m effect.Message, _ process.Hooks) process.Result {
		if m.Body == "a1" {
			close(started)
			<-release
			handlerCtxErr.Store(fmt.Sprint(ctx.Err()))
			return deleted()
		}
		t.Errorf("%s must not start during shutdown", m.Body)
		return deleted()
	}
	b.sendFIFO(t, "A", "a1", "a2", "a3", "a4", "a5")
	b.start(t)
	waitFor(t, started, 5*time.Second, "a1 to start")
	b.cancel()
	select {
	case <-b.done:
		t.Fatal("Run returned while a handler was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	b.stop(t)

	require.Equal(t, "<nil>", handlerCtxErr.Load(), "a handler that finishes within the grace period keeps its context")
	// The delete was pending (AckDelay is an hour) and was flushed at exit;
	// the rest are receivable again at once, in order.
	got := b.receiveNow(t, b.url)
	var names []string
	for _, m := range got {
		names = append(names, aws.ToString(m.Body))
	}
	require.Equal(t, []string{"a2", "a3", "a4", "a5"}, names)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	require.Equal(t, 1, b.rec.deletes)
	require.Len(t, b.rec.changes, 4, "handed back in one batch")
	for _, e := range b.rec.changes {
		require.Zero(t, e.VisibilityTimeout)
	}
}

func TestShutdownCancelsHandlersAfterTheTimeout(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	b := setup(t, options{config: func(c *Config) { c.ShutdownTimeout = grace }})
	started := make(chan struct{})
	b.proc.ProcessFunc = func(ctx context.Context, _ effect.Message, _ process.Hooks) process.Result {
		close(started)
		<-ctx.Done()
		return process.Result{Action: process.Retry, Err: ctx.Err()}
	}
	b.send(t, "m")
	b.start(t)
	waitFor(t, started, 5*time.Second, "the handler")
	at := time.Now()
	b.stop(t)
	took := time.Since(at)
	require.GreaterOrEqual(t, took, grace, "the handler had the grace period")
	require.Less(t, took, 5*time.Second)
	require.Contains(t, b.logs.String(), "shutdown timeout reached")
}

func TestForceCancelsHandlersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: func(c *Config) { c.ShutdownTimeout = time.Hour }})
	started := make(chan struct{})
	b.proc.ProcessFunc = func(ctx context.Context, _ effect.Message, _ process.Hooks) process.Result {
		close(started)
		<-ctx.Done()
		return process.Result{Action: process.Retry, Err: ctx.Err()}
	}
	b.send(t, "m")
	b.start(t)
	waitFor(t, started, 5*time.Second, "the handler")
	b.cancel()
	b.pool.Force()
	b.stop(t)
}

func TestReceiveAsksForWhatThePoolNeeds(t *testing.T) {
	t.Parallel()
	// The queue says 30 s; the pool is told 7 s (--visibility) and must ask
	// for that, or the keeper's idea of the deadline would be wrong.
	b := setup(t, options{fifo: true, queue: func(q *Queue) { q.Visibility = 7 * time.Second }})
	polling := make(chan struct{}, 8)
	b.rec.onReceive = func() {
		select {
		case polling <- struct{}{}:
		default:
		}
	}
	b.start(t)
	waitFor(t, polling, 5*time.Second, "a receive")
	b.stop(t)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	in := b.rec.firstReceive // the last one asked back what the stop's cancel abandoned
	require.Equal(t, int32(7), in.VisibilityTimeout)
	require.Equal(t, int32(1), in.WaitTimeSeconds)
	require.Equal(t, int32(10), in.MaxNumberOfMessages)
	require.NotEmpty(t, aws.ToString(in.ReceiveRequestAttemptId), "FIFO receives carry an attempt id")
	require.Equal(t, []string{"All"}, in.MessageAttributeNames)
}

func TestDeletesAreBatched(t *testing.T) {
	t.Parallel()
	const n = 200
	b := setup(t, options{config: func(c *Config) {
		c.Concurrency = 32
		c.AckDelay = 20 * time.Millisecond
	}})
	tr := newTracker(n)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		return tr.begin(m)(deleted())
	}
	b.send(t, bodies("m", n)...)
	b.start(t)
	waitFor(t, tr.allDone, 10*time.Second, "all messages")
	b.stop(t)
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	require.Equal(t, n, b.rec.deletes)
	maxEntries := 0
	for _, e := range b.rec.deleteBatches {
		maxEntries = max(maxEntries, e)
	}
	require.Greater(t, maxEntries, 1, "several deletes per DeleteMessageBatch")
	require.LessOrEqual(t, maxEntries, 10)
	requests := b.rec.receives + len(b.rec.deleteBatches)
	t.Logf("%d messages: %d receives, %d delete batches: %.2f requests per message", n, b.rec.receives, len(b.rec.deleteBatches), float64(requests)/n)
}

func TestPanickingProcessorIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true})
	var calls atomic.Int32
	done := make(chan struct{})
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		close(done)
		return deleted()
	}
	b.sendFIFO(t, "A", "m")
	b.start(t)
	waitFor(t, done, 10*time.Second, "the retry after the panic")
	logs := b.logs.String()
	require.Contains(t, logs, "processor panicked")
	require.Contains(t, logs, "panic=boom")
	require.True(t, strings.Contains(logs, "stack=") && strings.Contains(logs, "pool_test.go"), "the stack is logged")
}

func TestStaleRedeliveryReplacesThePendingOne(t *testing.T) {
	t.Parallel()
	l := &lane{}
	d := func(id, seq, receipt string) *delivery {
		return &delivery{msg: effect.Message{ID: id, SequenceNumber: seq}, receipt: receipt}
	}
	require.Nil(t, l.add(d("2", "0002", "r2")))
	require.Nil(t, l.add(d("3", "0003", "r3")))
	require.Nil(t, l.add(d("1", "0001", "r1")), "a message of an earlier receive goes first")
	stale := l.add(d("2", "0002", "r2-again"))
	require.NotNil(t, stale)
	require.Equal(t, "r2", stale.receipt)
	var got []string
	for _, x := range l.pending {
		got = append(got, x.receipt)
	}
	require.Equal(t, []string{"r1", "r2-again", "r3"}, got)
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	proc := &fakeProcessor{}
	s := memsqs.New()
	_, err := New(Config{Client: s, Processor: proc})
	require.Error(t, err)
	_, err = New(Config{Client: s, Processor: proc, Queues: []Queue{{URL: "u"}}})
	require.ErrorContains(t, err, "visibility")
	_, err = New(Config{Client: s, Processor: proc, Queues: []Queue{{URL: "u", Visibility: time.Second}, {URL: "u", Visibility: time.Second}}})
	require.ErrorContains(t, err, "twice")
	p, err := New(Config{Client: s, Processor: proc, Queues: []Queue{{URL: "u", Visibility: 3 * time.Second}}})
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, p.cfg.Queues[0].Lease, "the lease defaults to a little less than the visibility timeout")
	require.Equal(t, maxBatch*(DefaultConcurrency+ReceiversFor(DefaultConcurrency, false)), p.cfg.MaxInFlight)
	require.Equal(t, 2*DefaultConcurrency+maxBatch*ReceiversFor(DefaultConcurrency, false), p.maxLanes)
	p.Force() // before Run: no panic
}

// TestDuplicateIsLoggedAtInfo: a duplicate leaves a line at Info, the
// default level, with its dedup key; an applied message leaves none there.
func TestDuplicateIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	info := &syncBuffer{}
	b := setup(t, options{fifo: true, config: func(c *Config) {
		c.Log = slog.New(slog.NewTextHandler(info, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	var n atomic.Int32
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		defer n.Add(1)
		if m.Body == "again" {
			return process.Result{Action: process.Delete, Outcome: dedup.Duplicate, Key: "exactly#q.fifo#k-again"}
		}
		return process.Result{Action: process.Delete, Key: "exactly#q.fifo#k-first", Applied: true}
	}
	b.sendFIFO(t, "A", "first", "again")
	b.start(t)
	eventually(t, 10*time.Second, func() bool { return n.Load() == 2 }, "both messages")
	b.stop(t)
	logs := info.String()
	require.Contains(t, logs, "duplicate: not run again")
	require.Contains(t, logs, "dedup_key=exactly#q.fifo#k-again")
	require.NotContains(t, logs, "k-first", "an applied message is logged at Debug")
}

// TestNotHeldIsLeftToSQS: the processor says the delivery's visibility
// passed before its late claim (process.ErrNotHeld): the pool neither
// retries it in place nor changes its visibility (another consumer may hold
// it); SQS brings it back. Held tells the processor the truth at the start.
func TestNotHeldIsLeftToSQS(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifo: true})
	tr := newTracker(1)
	var first atomic.Bool
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, h process.Hooks) process.Result {
		end := tr.begin(m)
		if !assert.NotNil(t, h.Held) || !assert.True(t, h.Held(), "held when it starts") {
			return end(deleted())
		}
		if first.CompareAndSwap(false, true) {
			return end(process.Result{Action: process.Retry, Err: process.ErrNotHeld})
		}
		return end(deleted())
	}
	b.sendFIFO(t, "A", "a1")
	b.start(t)
	waitFor(t, tr.allDone, 60*time.Second, "a1, after SQS brought it back")
	b.stop(t)
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, []string{"a1", "a1"}, tr.order["A"])
		require.Equal(t, []int{1, 2}, tr.receiveCounts["a1"], "received again, not retried in place")
	})
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	require.Empty(t, b.rec.changes, "its visibility is not SQS's to be changed by this worker any more")
	require.Contains(t, b.logs.String(), "nothing more claimed, run or committed on it; leaving it to SQS")
}
