package bench

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// invocation is one call of a recording handler.
type invocation struct {
	at   time.Time
	recs []events.SQSMessage
}

// recorder is a handler that records its calls and reports the records
// fail says.
type recorder struct {
	mu    sync.Mutex
	calls []invocation
	fail  func(r events.SQSMessage) bool
	next  lambdaHandle // when set, answers instead of fail
}

func (h *recorder) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	h.mu.Lock()
	h.calls = append(h.calls, invocation{at: time.Now(), recs: ev.Records})
	h.mu.Unlock()
	if h.next != nil {
		return h.next(ctx, ev)
	}
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		if h.fail != nil && h.fail(r) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

func (h *recorder) snapshot() []invocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]invocation(nil), h.calls...)
}

func bodies(recs []events.SQSMessage) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Body
	}
	return out
}

// testQueue creates a queue on srv with the fakes' visibility timeout.
func testQueue(t *testing.T, srv *memsqs.Server, name string) string {
	t.Helper()
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(int(SweepVisibility.Seconds()))}
	if strings.HasSuffix(name, ".fifo") {
		attrs["FifoQueue"] = "true"
	}
	out, err := srv.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	require.NoError(t, err)
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, srv *memsqs.Server, url, body, group string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(body)
	}
	_, err := srv.SendMessage(context.Background(), in)
	require.NoError(t, err)
}

// queueEmpty reports whether url holds no message, visible or in flight.
func queueEmpty(t *testing.T, srv *memsqs.Server, url string) bool {
	t.Helper()
	out, err := srv.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	require.NoError(t, err)
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

// runESM runs m's conc loops until the returned stop is called.
func runESM(t *testing.T, m *esm, conc int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.run(ctx, conc) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// TestESMDeletesWhatTheHandlerDidNotReport: of a batch of ten, the two
// records reported failed stay in the queue and come back, once their
// visibility timeout has passed, with a receive count of 2; the other
// eight are deleted and never seen again.
func TestESMDeletesWhatTheHandlerDidNotReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memsqs.New()
		url := testQueue(t, srv, "q")
		for i := range 10 {
			send(t, srv, url, "m"+strconv.Itoa(i), "")
		}
		h := &recorder{fail: func(r events.SQSMessage) bool {
			return (r.Body == "m3" || r.Body == "m7") && r.Attributes["ApproximateReceiveCount"] == "1"
		}}
		m, err := newESM(context.Background(), srv, []string{url}, 10, 0, h.handle, nil)
		require.NoError(t, err)
		start := time.Now()
		stop := runESM(t, m, 1)
		time.Sleep(SweepVisibility + time.Minute)
		stop()

		calls := h.snapshot()
		require.Len(t, calls, 2, "the batch, then the two reported")
		require.Len(t, calls[0].recs, 10)
		require.Equal(t, start, calls[0].at)
		require.ElementsMatch(t, []string{"m3", "m7"}, bodies(calls[1].recs), "only the reported come back")
		require.Equal(t, SweepVisibility, calls[1].at.Sub(calls[0].at), "after their visibility timeout")
		for _, r := range calls[1].recs {
			require.Equal(t, "2", r.Attributes["ApproximateReceiveCount"])
			require.Equal(t, "aws:sqs", r.EventSource)
			require.True(t, strings.HasPrefix(r.EventSourceARN, "arn:aws:sqs:") && strings.HasSuffix(r.EventSourceARN, ":q"), r.EventSourceARN)
		}
		require.True(t, queueEmpty(t, srv, url), "everything handled was deleted")
	})
}

// TestESMKeepsTheBatchOfAFailedInvocation: an error, or an id the batch
// does not hold, keeps every record.
func TestESMKeepsTheBatchOfAFailedInvocation(t *testing.T) {
	for name, answer := range map[string]events.SQSEventResponse{
		"error":        {},
		"unknown id":   {BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "nope"}}},
		"empty answer": {},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := memsqs.New()
				url := testQueue(t, srv, "q")
				send(t, srv, url, "m0", "")
				send(t, srv, url, "m1", "")
				h := &recorder{next: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					if ev.Records[0].Attributes["ApproximateReceiveCount"] != "1" {
						return events.SQSEventResponse{}, nil
					}
					if name == "error" {
						return events.SQSEventResponse{}, errors.New("boom")
					}
					return answer, nil
				}}
				m, err := newESM(context.Background(), srv, []string{url}, 10, 0, h.handle, nil)
				require.NoError(t, err)
				stop := runESM(t, m, 1)
				time.Sleep(SweepVisibility + time.Minute)
				stop()
				calls := h.snapshot()
				if name == "empty answer" {
					require.Len(t, calls, 1, "everything deleted")
					return
				}
				require.Len(t, calls, 2)
				require.ElementsMatch(t, []string{"m0", "m1"}, bodies(calls[1].recs), "the whole batch came back")
			})
		})
	}
}

// TestESMBatchSize: no batch is bigger than the batch size, with or
// without a window, and every message is handled once.
func TestESMBatchSize(t *testing.T) {
	for _, window := range []time.Duration{0, 200 * time.Millisecond, 3 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := memsqs.New()
				url := testQueue(t, srv, "q")
				for i := range 25 {
					send(t, srv, url, "m"+strconv.Itoa(i), "")
				}
				h := &recorder{}
				m, err := newESM(context.Background(), srv, []string{url}, 3, window, h.handle, nil)
				require.NoError(t, err)
				stop := runESM(t, m, 2)
				time.Sleep(time.Minute)
				stop()
				var all []string
				for _, c := range h.snapshot() {
					require.LessOrEqual(t, len(c.recs), 3)
					all = append(all, bodies(c.recs)...)
				}
				require.Len(t, all, 25, "each once")
				require.True(t, queueEmpty(t, srv, url))
			})
		})
	}
	// A short first receive: two messages visible, five more a second
	// later; the window's further receive asks only for what is missing.
	synctest.Test(t, func(t *testing.T) {
		srv := memsqs.New()
		url := testQueue(t, srv, "q")
		for i := range 7 {
			in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m" + strconv.Itoa(i))}
			if i >= 2 {
				in.DelaySeconds = 1
			}
			_, err := srv.SendMessage(context.Background(), in)
			require.NoError(t, err)
		}
		h := &recorder{}
		m, err := newESM(context.Background(), srv, []string{url}, 3, 3*time.Second, h.handle, nil)
		require.NoError(t, err)
		start := time.Now()
		stop := runESM(t, m, 1)
		time.Sleep(time.Minute)
		stop()
		calls := h.snapshot()
		require.NotEmpty(t, calls)
		require.Len(t, calls[0].recs, 3, "two, then one more")
		require.Equal(t, time.Second, calls[0].at.Sub(start), "when the delayed ones came")
		for _, c := range calls {
			require.LessOrEqual(t, len(c.recs), 3)
		}
	})
	_, err := newESM(context.Background(), memsqs.New(), nil, 11, 0, nil, nil)
	require.ErrorContains(t, err, "want 1 to 10")
}

// TestESMWindowWaitsForATrickle: a message every 100 ms; with a 500 ms
// window the first invocation comes 500 ms after the first message
// (within a short poll's spacing), with the messages sent meanwhile;
// without one it comes at once, with one message.
func TestESMWindowWaitsForATrickle(t *testing.T) {
	for _, window := range []time.Duration{0, 500 * time.Millisecond, 2500 * time.Millisecond} {
		t.Run(window.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := memsqs.New()
				url := testQueue(t, srv, "q.fifo")
				h := &recorder{}
				m, err := newESM(context.Background(), srv, []string{url}, 10, window, h.handle, nil)
				require.NoError(t, err)
				stop := runESM(t, m, 1)
				synctest.Wait() // the poller's long poll waits
				first := time.Now()
				for i := range 40 {
					send(t, srv, url, "m"+strconv.Itoa(i), "g"+strconv.Itoa(i))
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(time.Minute)
				stop()
				calls := h.snapshot()
				require.NotEmpty(t, calls)
				waited := calls[0].at.Sub(first)
				n := len(calls[0].recs)
				if window == 0 {
					require.Zero(t, waited, "no window: at once")
					require.Equal(t, 1, n)
					return
				}
				if sent := int(window / (100 * time.Millisecond)); sent < 10 {
					require.GreaterOrEqual(t, waited, window, "the window's time")
					require.Less(t, waited, window+windowPoll+time.Millisecond)
					require.GreaterOrEqual(t, n, sent, "what was sent meanwhile")
					require.LessOrEqual(t, n, sent+1)
					return
				}
				require.Equal(t, 900*time.Millisecond, waited, "a full batch goes before its window ends")
				require.Equal(t, 10, n)
			})
		})
	}
}

// failOnce fails the first try of the ledger entry with the given body
// prefix.
type failOnce struct {
	effect.Effect
	prefix string
	mu     sync.Mutex
	done   bool
}

func (f *failOnce) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	f.mu.Lock()
	fail := !f.done && strings.HasPrefix(in.Message.Body, f.prefix)
	f.done = f.done || fail
	f.mu.Unlock()
	if fail {
		return effect.Output{}, errors.New("once")
	}
	return f.Effect.Apply(ctx, in)
}

// TestESMFIFOGroupComesBackInOrder: the hand-written handler fails g0's
// second message; it and g0's third are reported, g0's first and all of
// g1 deleted, and the two come back together after the visibility
// timeout, in order (the ledger, which refuses a seq that goes back,
// applies all six).
func TestESMFIFOGroupComesBackInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := memsqs.New()
		url := testQueue(t, srv, "bench.fifo")
		require.NoError(t, fill(ctx, srv, url, Workload(6, 2).Batches()))
		db := memdynamo.New()
		_, err := db.CreateTable(ctx, keyedTableInput("ledger"))
		require.NoError(t, err)
		reg := prometheus.NewRegistry()
		hw := newHandwrittenLambda(db, "ledger", reg)
		hw.ledger = &failOnce{Effect: &builtin.Ledger{Table: "ledger"}, prefix: `{"account":"g0","amount_cents":3,"seq":2}`}
		h := &recorder{next: hw.Handle}
		m, err := newESM(ctx, srv, []string{url}, 10, 0, h.handle, reg)
		require.NoError(t, err)
		stop := runESM(t, m, 1)
		time.Sleep(SweepVisibility + time.Minute)
		stop()

		calls := h.snapshot()
		require.Len(t, calls, 2)
		require.Len(t, calls[0].recs, 6, "one receive: each group's messages together")
		require.Equal(t, []string{
			`{"account":"g0","amount_cents":3,"seq":2}`, `{"account":"g0","amount_cents":5,"seq":3}`,
		}, bodies(calls[1].recs), "the failed record and its later group-mate, in order")
		require.Equal(t, SweepVisibility, calls[1].at.Sub(calls[0].at))
		require.Equal(t, 6.0, gathered(t, reg, "exactly_effects_applied_total"))
		require.Equal(t, 1.0, gathered(t, reg, "exactly_permanent_failures_total"))
		require.Equal(t, 8.0, gathered(t, reg, "exactly_messages_received_total"))
		require.Equal(t, 2.0, gathered(t, reg, "exactly_bench_esm_records_kept_total"))
		require.True(t, queueEmpty(t, srv, url))
	})
}

// TestLambdaConsumersDrain: both Lambda consumers, FIFO and standard,
// drain a pre-fill through the latency layer, each message applied once.
func TestLambdaConsumersDrain(t *testing.T) {
	for _, consumer := range []string{ConsumerLambda, ConsumerLambdaHandwritten} {
		for _, standard := range []bool{false, true} {
			t.Run(consumer+"/standard="+strconv.FormatBool(standard), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx := context.Background()
					o := consumeOpts{consumer: consumer, prefill: 300, groups: 20, queues: 1, scale: 1, jitter: 0.2, seed: 1, standard: standard, batch: 10}
					reg := prometheus.NewRegistry()
					st := newStates(reg)
					sq, db, err := o.fakes(ctx, reg, st)
					require.NoError(t, err)
					require.Equal(t, !standard, strings.HasSuffix(o.queueURLs[0], ".fifo"))
					handle, err := o.lambdaHandler(ctx, sq, db, reg, newGroupWaits(reg), st, nil, io.Discard)
					require.NoError(t, err)
					m, err := newESM(ctx, sq, o.queueURLs, o.batch, o.window, handle, reg)
					require.NoError(t, err)
					stop := runESM(t, m, 4)
					for gathered(t, reg, "exactly_effects_applied_total") < 300 {
						time.Sleep(100 * time.Millisecond)
					}
					time.Sleep(time.Second)
					stop()
					require.Equal(t, 300.0, gathered(t, reg, "exactly_effects_applied_total"))
					require.Equal(t, 300.0, gathered(t, reg, "exactly_messages_received_total"))
					require.Equal(t, 300.0, gathered(t, reg, "exactly_bench_esm_records_total"))
					require.Zero(t, gathered(t, reg, "exactly_bench_esm_records_kept_total"))
					require.Equal(t, 300.0, gathered(t, reg, "exactly_bench_delete_waits_total"), "every delete timed")
					time.Sleep(21 * time.Second) // the pollers' abandoned long polls end
				})
			})
		}
	}
}

// TestConsumeLambdaFlags: the Lambda consumers run only in the aws
// regime; a bad -batch or -window fails with one line naming it.
func TestConsumeLambdaFlags(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"-consumer lambda -regime emulator":                   "-consumer lambda: runs only in -regime aws",
		"-consumer lambda-handwritten":                        "-consumer lambda-handwritten: runs only in -regime aws",
		"-consumer lambda -regime aws -batch 0":               "-batch 0: want 1 to 10",
		"-consumer lambda -regime aws -batch 11":              "-batch 11: want 1 to 10",
		"-consumer lambda -regime aws -window -1s":            "-window -1s: want 0 to 5m0s",
		"-consumer lambda -regime aws -window x":              "flag -window",
		"-consumer lambda-handwritten -regime aws -window 6m": "-window 6m0s",
		"-consumer lambdas":                                   "want handwritten, worker, grouped, carried, lambda or lambda-handwritten",
	} {
		err := Consume(context.Background(), strings.Fields(args), io.Discard)
		require.ErrorContains(t, err, want, args)
		require.NotContains(t, err.Error(), "\n", args)
	}
}

func TestLambdaModelRate(t *testing.T) {
	t.Parallel()
	fifo := SweepPoint{Dim: SweepLambda, Batch: 10}
	// The hand-written handler: a receive, 10 commits in turn, a delete.
	require.InDelta(t, 16*10/0.150, LambdaModelRate(fifo, ConsumerLambdaHandwritten, 16, 1, 8), 1e-6)
	// The library's: the batch's deepest group in turn (8 of a group).
	require.InDelta(t, 16*10/0.126, LambdaModelRate(fifo, ConsumerLambda, 16, 1, 7.8), 1e-6)
	require.InDelta(t, 16*10/0.042, LambdaModelRate(fifo, ConsumerLambda, 16, 1, 1), 1e-6)
	// A standard queue: every message its own lane.
	std := SweepPoint{Dim: SweepLambdaStandard, Batch: 10}
	require.InDelta(t, 16*10/0.042, LambdaModelRate(std, ConsumerLambda, 16, 1, 8), 1e-6)
	one := SweepPoint{Dim: SweepLambdaStandard, Batch: 1}
	require.InDelta(t, 16/0.042, LambdaModelRate(one, ConsumerLambdaHandwritten, 16, 1, 8), 1e-6)
	// The groups bound the FIFO loops.
	require.InDelta(t, 2*10/0.150, LambdaModelRate(SweepPoint{Dim: SweepLambda, Batch: 10, Groups: 2}, ConsumerLambdaHandwritten, 16, 1, 8), 1e-6)
	require.InDelta(t, sweepModel(fifo, ConsumerLambda, 16, 1, 8192), LambdaModelRate(fifo, ConsumerLambda, 16, 1, 8), 1e-9, "the pre-fill's depth")
}
