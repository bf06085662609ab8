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

// keeperSQS injects faults into ChangeMessageVisibilityBatch: whole calls
// (before or after they take effect) and single entries, chosen by the body
// of the message a receipt belongs to. It records every entry it is given.
type keeperSQS struct {
	SQS

	mu        sync.Mutex
	bodyOf    map[string]string // receipt handle -> body
	receiptNo map[string]int    // receipt handle -> which receipt of its message (1, 2, ...)
	receipts  map[string]int    // body -> receipts so far
	calls     int
	// callFault: call n (1-based) fails as a whole with err; applied: it
	// took effect first (its response lost).
	callFault func(n int) (applied bool, err error)
	// entryFault: the error code an entry fails with, or "".
	entryFault func(body string, receiptNo int) string
	entries    []extEntry
}

type extEntry struct {
	at        time.Time
	body      string
	receiptNo int
	vis       int32
	failed    string // code, "call" (whole call), or ""
}

func newKeeperSQS(inner SQS) *keeperSQS {
	return &keeperSQS{SQS: inner, bodyOf: map[string]string{}, receiptNo: map[string]int{}, receipts: map[string]int{}}
}

func (k *keeperSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := k.SQS.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		k.mu.Lock()
		for _, m := range out.Messages {
			body := aws.ToString(m.Body)
			k.receipts[body]++
			k.bodyOf[aws.ToString(m.ReceiptHandle)] = body
			k.receiptNo[aws.ToString(m.ReceiptHandle)] = k.receipts[body]
		}
		k.mu.Unlock()
	}
	return out, err
}

func (k *keeperSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	k.mu.Lock()
	k.calls++
	var applied bool
	var callErr error
	if k.callFault != nil {
		applied, callErr = k.callFault(k.calls)
	}
	var pass []types.ChangeMessageVisibilityBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for _, e := range in.Entries {
		r := aws.ToString(e.ReceiptHandle)
		x := extEntry{at: time.Now(), body: k.bodyOf[r], receiptNo: k.receiptNo[r], vis: e.VisibilityTimeout}
		code := ""
		if callErr == nil && k.entryFault != nil {
			code = k.entryFault(x.body, x.receiptNo)
		}
		switch {
		case callErr != nil:
			x.failed = "call"
		case code != "":
			x.failed = code
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("injected"), SenderFault: true})
			k.entries = append(k.entries, x)
			continue
		}
		k.entries = append(k.entries, x)
		pass = append(pass, e)
	}
	k.mu.Unlock()
	if callErr != nil {
		if applied {
			if _, err := k.SQS.ChangeMessageVisibilityBatch(ctx, in, opts...); err != nil {
				return nil, err
			}
		}
		return nil, callErr
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	if len(pass) > 0 {
		o, err := k.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: in.QueueUrl, Entries: pass}, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful, out.Failed = o.Successful, o.Failed
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// extensionsOf returns the entries recorded for one receipt of a message.
func (k *keeperSQS) extensionsOf(body string, receiptNo int) []extEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []extEntry
	for _, e := range k.entries {
		if e.body == body && e.receiptNo == receiptNo {
			out = append(out, e)
		}
	}
	return out
}

// extObserver counts what the keeper reports too.
type extObserver struct {
	testObserver
	extFailed atomic.Int64
	stale     atomic.Int64
}

func (o *extObserver) ExtensionFailed(_ string, n int) { o.extFailed.Add(int64(n)) }
func (o *extObserver) ReceiptStale(_ string, n int)    { o.stale.Add(int64(n)) }

// keeperSetup is a FIFO pool with an 8 s visibility timeout on a faulty SQS.
func keeperSetup(t *testing.T) (*testBundle, *keeperSQS, *extObserver) {
	obs := &extObserver{}
	var k *keeperSQS
	b := setup(t, options{fifo: true, attrs: map[string]string{"VisibilityTimeout": "8"}, queue: func(q *Queue) {
		q.Visibility = 8 * time.Second
	}, config: func(c *Config) {
		k = newKeeperSQS(c.Client)
		c.Client = k
		c.Observer = obs
	}})
	return b, k, obs
}

// TestFailedExtensionIsRetriedSoon: the first visibility extension fails
// (the whole call before or after it took effect, or its entry). Before the
// fix the keeper counted the extension as done, waited for the next one
// until the message was due again, and the message became visible while its
// handler ran: SQS handed it out again and it ran twice. Now the deadline
// advances only on a confirmed extension, and a failed one is tried again
// within vis/16; it is counted as an extension failure, not as a failed
// batch entry.
func TestFailedExtensionIsRetriedSoon(t *testing.T) {
	t.Parallel()
	errDown := errors.New("connection reset by peer")
	for name, fault := range map[string]func(k *keeperSQS){
		"call fails": func(k *keeperSQS) {
			k.callFault = func(n int) (bool, error) { return false, map[bool]error{true: errDown}[n == 1] }
		},
		"call takes effect, response lost": func(k *keeperSQS) {
			k.callFault = func(n int) (bool, error) { return true, map[bool]error{true: errDown}[n == 1] }
		},
		"entry fails": func(k *keeperSQS) {
			var once atomic.Bool
			k.entryFault = func(string, int) string {
				if once.CompareAndSwap(false, true) {
					return "InternalError"
				}
				return ""
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, k, obs := keeperSetup(t)
				fault(k)
				tr := newTracker(1)
				b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
					end := tr.begin(m)
					time.Sleep(30 * time.Second) // outlasts the visibility timeout several times
					return end(deleted())
				}
				b.sendFIFO(t, "A", "a1")
				b.start(t)
				<-tr.allDone
				time.Sleep(time.Second) // the delete goes out; a lapse would have been received again
				b.stop(t)

				tr.snapshot(func(tr *tracker) {
					require.Equal(t, 1, tr.runs["a1"], "never visible again while it ran")
				})
				ext := k.extensionsOf("a1", 1)
				require.GreaterOrEqual(t, len(ext), 2)
				require.NotEmpty(t, ext[0].failed, "the first extension failed")
				require.Empty(t, ext[1].failed)
				require.LessOrEqual(t, ext[1].at.Sub(ext[0].at), time.Second/2+10*time.Millisecond, "retried within vis/16 (plus the ack delay)")
				require.Equal(t, int64(1), obs.extFailed.Load(), "counted as an extension failure")
				require.Zero(t, obs.stale.Load())
				require.Zero(t, obs.batchFailed.Load(), "not counted again as a failed batch entry; the delete succeeded")
				v, nv := b.counts(t, b.url)
				require.Equal(t, 0, v+nv)
			})
		})
	}
}

// TestStaleReceiptMarksTheDeliveryLost: an extension entry fails with a
// code that says the receipt handle no longer works (the worker does not own
// that delivery any more). Before the fix the keeper went on extending the
// dead receipt for ever and the pool ran the message on it. Now the delivery
// is lost: no more extensions of that receipt, counted once as stale, and
// it is not run; the message runs once, on its next receipt.
func TestStaleReceiptMarksTheDeliveryLost(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"ReceiptHandleIsInvalid", "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, k, obs := keeperSetup(t)
				k.entryFault = func(body string, receiptNo int) string {
					if body == "a2" && receiptNo == 1 {
						return code
					}
					return ""
				}
				tr := newTracker(2)
				b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
					end := tr.begin(m)
					if m.Body == "a1" {
						time.Sleep(30 * time.Second) // a2 waits behind it, extended meanwhile
					}
					return end(deleted())
				}
				b.sendFIFO(t, "A", "a1", "a2")
				b.start(t)
				<-tr.allDone
				time.Sleep(time.Second)
				b.stop(t)

				require.Len(t, k.extensionsOf("a2", 1), 1, "a stale receipt is not extended again")
				require.Equal(t, int64(1), obs.stale.Load())
				require.Equal(t, int64(1), obs.extFailed.Load())
				tr.snapshot(func(tr *tracker) {
					require.Equal(t, []string{"a1", "a2"}, tr.order["A"])
					require.Equal(t, []int{2}, tr.receiveCounts["a2"], "run once, on its next receipt, not on the lost one")
				})
				v, nv := b.counts(t, b.url)
				require.Equal(t, 0, v+nv)
			})
		})
	}
}

// TestHeldThroughANewerReceipt: while a message runs, its extensions fail
// until SQS hands it out again, to this same worker (a second receipt, which
// waits in the lane behind the first). The message is still the worker's:
// Hooks.Held, asked when the run commits, says so (before the fix it said no,
// for the first receipt's visibility had passed, and a transactional or
// optimistic commit was dropped, the newer receipt handed back with it: a
// receive wasted towards maxReceiveCount).
func TestHeldThroughANewerReceipt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, k, _ := keeperSetup(t)
		k.entryFault = func(_ string, receiptNo int) string {
			if receiptNo == 1 {
				return "InternalError" // the first receipt is never extended
			}
			return ""
		}
		var held []bool
		var receipts []int
		done := make(chan struct{})
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, h process.Hooks) process.Result {
			receipts = append(receipts, m.ReceiveCount)
			if m.ReceiveCount == 1 {
				time.Sleep(12 * time.Second) // past the 8 s visibility: SQS hands it out again
				held = append(held, h.Held())
				return deleted()
			}
			close(done)
			return deleted()
		}
		b.sendFIFO(t, "A", "a1")
		b.start(t)
		<-done
		b.stop(t)
		require.Equal(t, []bool{true}, held, "held through the newer receipt")
		require.Equal(t, []int{1, 2}, receipts)
	})
}

// slowAnswerSQS delays the answer of the first receive that brings a
// message by delay, after SQS handed the message out.
type slowAnswerSQS struct {
	SQS
	delay    time.Duration
	once     atomic.Bool
	answered chan struct{} // closed when the slow answer is given
}

func (s *slowAnswerSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := s.SQS.ReceiveMessage(ctx, in, opts...)
	if err == nil && len(out.Messages) > 0 && s.once.CompareAndSwap(false, true) {
		time.Sleep(s.delay) // the response is slow: SQS's visibility runs meanwhile
		close(s.answered)
	}
	return out, err
}

// TestSlowAnswerIsNotRun: a receive's answer arrives 40 s (or 9 s) after
// SQS handed the message out, past its 8 s visibility: SQS may have handed
// it to someone else since. The pool counts a delivery's visibility from
// when its receive was made, so it knows the delivery is stale and does
// not run it (before the fix it dated it a second before the answer came,
// and claimed and committed a message it no longer held, its claim keeping
// the message's next holder busy; dated by the end of the poll's
// wait, the 9 s answer still looked held). The message runs once, on its
// next receipt. The wait is cut to half the visibility (4 s).
func TestSlowAnswerIsNotRun(t *testing.T) {
	t.Parallel()
	// 40 s: past the long poll's wait and the visibility; 9 s: within the
	// wait a dating by its end would allow, past the visibility.
	for _, delay := range []time.Duration{40 * time.Second, 9 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			slowAnswerNotRun(t, delay)
		})
	}
}

func slowAnswerNotRun(t *testing.T, delay time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		var slow *slowAnswerSQS
		b := setup(t, options{fifo: true, attrs: map[string]string{"VisibilityTimeout": "8"}, queue: func(q *Queue) {
			q.Visibility = 8 * time.Second
		}, config: func(c *Config) {
			c.WaitTime = 20 * time.Second
			slow = &slowAnswerSQS{SQS: c.Client, delay: delay, answered: make(chan struct{})}
			c.Client = slow
		}})
		var mu sync.Mutex
		var counts []int
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			mu.Lock()
			counts = append(counts, m.ReceiveCount)
			mu.Unlock()
			return deleted()
		}
		b.sendFIFO(t, "A", "a1")
		b.start(t)
		<-slow.answered
		time.Sleep(5 * time.Second) // the pool has the stale answer
		b.stop(t)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []int{2}, counts, "run once, on the receipt it held, not on the stale one")
	})
}

// TestWaitIsAtMostHalfTheVisibility: a receive's wait is the configured
// one, cut to half the visibility, at least a second.
func TestWaitIsAtMostHalfTheVisibility(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vis  int32
		wait time.Duration
		want int32
	}{{30, 20 * time.Second, 15}, {60, 20 * time.Second, 20}, {8, 20 * time.Second, 4}, {1, 20 * time.Second, 1}, {60, time.Second, 1}} {
		qs := &queueState{vis: c.vis}
		require.Equal(t, c.want, qs.wait(c.wait), "visibility %d s, wait %s", c.vis, c.wait)
	}
}
