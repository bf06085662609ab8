package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// idleSetup is setup with the idle visibility on (DefaultIdleVisibility)
// and a 20 s wait, as the worker runs.
func idleSetup(t *testing.T, fifo bool, more func(c *Config)) *testBundle {
	return setup(t, options{fifo: fifo, config: func(c *Config) {
		c.IdleVisibility = 0
		c.WaitTime = 20 * time.Second
		if more != nil {
			more(c)
		}
	}})
}

// stopWithin cancels the pool's context and requires Run to return within
// d of virtual time.
func (b *testBundle) stopWithin(t *testing.T, d time.Duration) {
	t.Helper()
	at := time.Now()
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	require.Less(t, time.Since(at), d, "an idle pool stops at once")
}

// TestAnIdleStopIsPromptAndHidesAtMostTheIdleVisibility: an idle pool's
// open long polls are cancelled by the stop, which returns at once, not
// after the wait time. SQS goes on serving a cancelled poll (memsqs does
// too): a message sent just after the stop is taken by nobody's poll and is
// hidden, with what follows it in its group, for at most the idle
// visibility; then it is received again, in order.
func TestAnIdleStopIsPromptAndHidesAtMostTheIdleVisibility(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{true, false} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := idleSetup(t, fifo, nil)
				b.start(t)
				time.Sleep(30 * time.Second) // idle: its polls came back empty
				synctest.Wait()
				b.stopWithin(t, time.Second)
				if fifo {
					b.sendFIFO(t, "A", "late1", "late2")
				} else {
					b.send(t, "late1")
				}
				synctest.Wait()
				_, nv := b.counts(t, b.url)
				require.Positive(t, nv, "an abandoned poll took what came after the stop (as SQS's would)")
				time.Sleep(DefaultIdleVisibility)
				synctest.Wait()
				v, nv := b.counts(t, b.url)
				require.Zero(t, nv, "hidden no longer than the idle visibility")
				var got []string
				for _, m := range b.receiveNow(t, b.url) {
					got = append(got, aws.ToString(m.Body))
				}
				if fifo {
					require.Equal(t, 2, v)
					require.Equal(t, []string{"late1", "late2"}, got, "received again in group order")
				} else {
					require.Equal(t, []string{"late1"}, got)
				}
			})
		})
	}
}

// TestAnIdleStopAsksBackWhatItsPollTook: the stop cancels an idle FIFO
// poll that had taken messages (its answer lost); the pool asks them back
// by the poll's attempt id and hands them back, visible at once in order.
func TestAnIdleStopAsksBackWhatItsPollTook(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, queue: func(q *Queue) { q.Receivers = 1 },
			config: func(c *Config) { c.IdleVisibility = 0; c.WaitTime = 20 * time.Second }})
		l := &losingSQS{SQS: b.rec}
		b.cfg.Client = l
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			t.Errorf("%s ran: its receive's answer was lost", m.Body)
			return deleted()
		}
		b.start(t)
		synctest.Wait()
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		synctest.Wait()
		require.True(t, l.lost.Load())
		b.stopWithin(t, time.Second)
		require.Equal(t, int32(1), l.retries.Load(), "one receive with the cancelled poll's attempt id")
		var got []string
		for _, m := range b.receiveNow(t, b.url) {
			got = append(got, aws.ToString(m.Body))
		}
		require.Equal(t, []string{"a1", "a2", "a3"}, got, "visible again at once, in group order")
	})
}

// extensionSQS records which messages' visibility SQS confirmed extended
// to the queue's, and can fail or delay the first ChangeMessageVisibilityBatch.
type extensionSQS struct {
	*recordingSQS
	mu       sync.Mutex
	receipts map[string]string // receipt -> body
	extended map[string]bool   // bodies
	calls    atomic.Int32
	// first, when set, answers the first batch instead of SQS.
	first func(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

func newExtensionSQS(b *testBundle) *extensionSQS {
	e := &extensionSQS{recordingSQS: b.rec, receipts: map[string]string{}, extended: map[string]bool{}}
	b.cfg.Client = e
	return e
}

func (e *extensionSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := e.recordingSQS.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		e.mu.Lock()
		for _, m := range out.Messages {
			e.receipts[aws.ToString(m.ReceiptHandle)] = aws.ToString(m.Body)
		}
		e.mu.Unlock()
	}
	return out, err
}

func (e *extensionSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	var out *sqs.ChangeMessageVisibilityBatchOutput
	var err error
	if e.calls.Add(1) == 1 && e.first != nil {
		out, err = e.first(ctx, in)
	} else {
		out, err = e.recordingSQS.ChangeMessageVisibilityBatch(ctx, in, opts...)
	}
	if err == nil {
		e.mu.Lock()
		for _, s := range out.Successful {
			for _, en := range in.Entries {
				if aws.ToString(en.Id) == aws.ToString(s.Id) && en.VisibilityTimeout == 30 {
					e.extended[e.receipts[aws.ToString(en.ReceiptHandle)]] = true
				}
			}
		}
		e.mu.Unlock()
	}
	return out, err
}

func (e *extensionSQS) wasExtended(body string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.extended[body]
}

// runs records, per body, the receive counts it ran with, in order.
type runs struct {
	mu    sync.Mutex
	order []string
	count map[string][]int
}

func (r *runs) add(m effect.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == nil {
		r.count = map[string][]int{}
	}
	r.order = append(r.order, m.Body)
	r.count[m.Body] = append(r.count[m.Body], m.ReceiveCount)
}

// TestAnIdlePollsMessagesStartOnlyOnceExtended: what an idle poll brings
// (at the idle visibility) starts only after SQS confirmed its extension
// to the queue's visibility, one ChangeMessageVisibilityBatch for the
// receive.
func TestAnIdlePollsMessagesStartOnlyOnceExtended(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := idleSetup(t, true, nil)
		e := newExtensionSQS(b)
		var r runs
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			require.True(t, e.wasExtended(m.Body), "%s started before its extension was confirmed", m.Body)
			r.add(m)
			return deleted()
		}
		b.start(t)
		time.Sleep(30 * time.Second)
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, []string{"a1", "a2", "a3"}, r.order)
		require.Equal(t, int32(1), e.calls.Load(), "one extension request for the receive")
		require.Equal(t, DefaultIdleVisibility/time.Second, time.Duration(b.rec.receiveVisibility(t))*time.Second/time.Second)
		b.stopWithin(t, time.Second)
	})
}

func (r *recordingSQS) receiveVisibility(t *testing.T) int32 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastReceive.VisibilityTimeout
}

// TestAFailedExtensionStartsNothing: the extension request fails (its
// answer lost: it may have been applied). Nothing of the receive starts;
// all of it is handed back and runs on its next receive, in order.
func TestAFailedExtensionStartsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := idleSetup(t, true, nil)
		e := newExtensionSQS(b)
		e.first = func(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
			_, _ = b.rec.ChangeMessageVisibilityBatch(ctx, in) // applied; the answer is lost
			return nil, errors.New("connection reset")
		}
		var r runs
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			r.add(m)
			return deleted()
		}
		b.start(t)
		time.Sleep(30 * time.Second)
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		time.Sleep(2 * time.Second) // well within the queue's 30 s: handed back, not left to expire
		synctest.Wait()
		require.Equal(t, []string{"a1", "a2", "a3"}, r.order)
		for _, body := range r.order {
			require.Equal(t, []int{2}, r.count[body], "%s ran once, from its second receive", body)
		}
		require.Contains(t, b.logs.String(), "could not be extended")
		b.stopWithin(t, time.Second)
	})
}

// TestAPartlyFailedExtensionStartsOnlyWhatPrecedesTheFailure: SQS fails
// the entry of a2: a1 runs; a2, and a3 behind it in the group, do not
// start from that receive; they come back and run in order.
func TestAPartlyFailedExtensionStartsOnlyWhatPrecedesTheFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := idleSetup(t, true, nil)
		e := newExtensionSQS(b)
		e.first = func(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
			rest := *in
			rest.Entries = append([]types.ChangeMessageVisibilityBatchRequestEntry{in.Entries[0]}, in.Entries[2:]...)
			out, err := b.rec.ChangeMessageVisibilityBatch(ctx, &rest)
			if err != nil {
				return nil, err
			}
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: in.Entries[1].Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: false})
			return out, nil
		}
		var r runs
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			r.add(m)
			return deleted()
		}
		b.start(t)
		time.Sleep(30 * time.Second)
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"a1", "a2", "a3"}, r.order, "group order kept")
		require.Equal(t, []int{1}, r.count["a1"])
		require.Equal(t, []int{2}, r.count["a2"], "a2 did not start from the receive its extension failed in")
		require.Equal(t, []int{2}, r.count["a3"], "nor a3, behind it")
		b.stopWithin(t, time.Second)
	})
}

// TestAnExtensionTooLateStartsNothingSQSHandedOutAgain: the process
// stalls between the receive and the extension for longer than the idle
// visibility. SQS hands the messages to the pool's other receiver, which
// runs them; the late extension is refused (the receipts are stale) and
// starts nothing: each message runs once, in order.
func TestAnExtensionTooLateStartsNothingSQSHandedOutAgain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := idleSetup(t, true, func(c *Config) { c.Queues[0].Receivers = 2 })
		e := newExtensionSQS(b)
		e.first = func(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
			time.Sleep(DefaultIdleVisibility + time.Second) // stalled
			return b.rec.ChangeMessageVisibilityBatch(context.Background(), in)
		}
		var r runs
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			r.add(m)
			return deleted()
		}
		b.start(t)
		time.Sleep(30 * time.Second)
		b.sendFIFO(t, "A", "a1", "a2", "a3")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"a1", "a2", "a3"}, r.order, "each once, in order")
		for _, body := range r.order {
			require.Equal(t, []int{2}, r.count[body], "%s ran from its second receive only", body)
		}
		b.stopWithin(t, time.Second)
	})
}

// TestIdleReceivesCostOneExtensionEach measures the requests of a
// trickle (one message every 30 s: every receive that brings one is idle)
// and of a steady stream, with the idle visibility and without.
func TestIdleReceivesCostOneExtensionEach(t *testing.T) {
	t.Parallel()
	for _, idle := range []bool{false, true} {
		for _, trickle := range []bool{true, false} {
			synctest.Test(t, func(t *testing.T) {
				b := setup(t, options{fifo: true, config: func(c *Config) {
					c.WaitTime = 20 * time.Second
					if idle {
						c.IdleVisibility = 0
					}
				}})
				b.start(t)
				const n = 20
				every := 30 * time.Second
				if !trickle {
					every = 10 * time.Millisecond
				}
				for i := range n {
					time.Sleep(every)
					b.sendFIFO(t, "g"+string(rune('a'+i%5)), "m"+string(rune('a'+i)))
				}
				time.Sleep(time.Second)
				synctest.Wait()
				b.stopWithin(t, 21*time.Second)
				b.rec.mu.Lock()
				defer b.rec.mu.Unlock()
				require.Equal(t, n, b.rec.deletes)
				t.Logf("idle visibility %v, trickle %v: %d messages, %d receives, %d change-visibility batches, %d delete batches: %.2f requests per message",
					idle, trickle, n, b.rec.receives, b.rec.changeBatches, len(b.rec.deleteBatches),
					float64(b.rec.receives+b.rec.changeBatches+len(b.rec.deleteBatches))/n)
				if !idle {
					require.Zero(t, b.rec.changeBatches)
				} else if trickle {
					require.Equal(t, n, b.rec.changeBatches, "one extension per idle receive that brought a message")
				}
			})
		}
	}
}
