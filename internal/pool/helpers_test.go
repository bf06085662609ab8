package pool

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/process"
)

var _ SQS = (*memsqs.Server)(nil)

// fakeProcessor is a Processor made of a function field.
type fakeProcessor struct {
	ProcessFunc func(ctx context.Context, m effect.Message, h process.Hooks) process.Result
}

func (f *fakeProcessor) Process(ctx context.Context, m effect.Message, h process.Hooks) process.Result {
	return f.ProcessFunc(ctx, m, h)
}

func deleted() process.Result { return process.Result{Action: process.Delete} }

// recordingSQS passes calls through and records what the pool asked for.
type recordingSQS struct {
	SQS

	mu            sync.Mutex
	receives      int
	receiving     int // calls in progress
	deleteBatches []int
	deletes       int
	changes       []types.ChangeMessageVisibilityBatchRequestEntry
	changeBatches int
	sends         int
	lastReceive   sqs.ReceiveMessageInput
	firstReceive  sqs.ReceiveMessageInput
	onReceive     func() // called at the start of every ReceiveMessage
}

func (r *recordingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	r.mu.Lock()
	r.receives++
	r.receiving++
	r.lastReceive = *in
	if r.receives == 1 {
		r.firstReceive = *in
	}
	f := r.onReceive
	r.mu.Unlock()
	if f != nil {
		f()
	}
	defer func() {
		r.mu.Lock()
		r.receiving--
		r.mu.Unlock()
	}()
	return r.SQS.ReceiveMessage(ctx, in, opts...)
}

func (r *recordingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	r.mu.Lock()
	r.deleteBatches = append(r.deleteBatches, len(in.Entries))
	r.deletes += len(in.Entries)
	r.mu.Unlock()
	return r.SQS.DeleteMessageBatch(ctx, in, opts...)
}

func (r *recordingSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	r.mu.Lock()
	r.changes = append(r.changes, in.Entries...)
	r.changeBatches++
	r.mu.Unlock()
	return r.SQS.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

func (r *recordingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.mu.Lock()
	r.sends++
	r.mu.Unlock()
	return r.SQS.SendMessage(ctx, in, opts...)
}

// testObserver counts what the pool reports.
type testObserver struct {
	nopObserver
	batchFailed atomic.Int64
	inflight    atomic.Int64
	maxInflight atomic.Int64
}

func (o *testObserver) BatchFailed(_, _ string, n int) { o.batchFailed.Add(int64(n)) }
func (o *testObserver) InFlight(d int) {
	v := o.inflight.Add(int64(d))
	for {
		m := o.maxInflight.Load()
		if v <= m || o.maxInflight.CompareAndSwap(m, v) {
			return
		}
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type options struct {
	fifo       bool
	attrs      map[string]string
	maxReceive int
	queue      func(q *Queue)
	config     func(c *Config)
}

type testBundle struct {
	sqs  *memsqs.Server
	rec  *recordingSQS
	url  string
	dlq  string
	proc *fakeProcessor
	obs  *testObserver
	logs *syncBuffer
	cfg  Config
	pool *Pool

	cancel context.CancelFunc
	done   chan struct{}
}

// setup makes a memsqs queue and a pool on it with fast test settings; the
// test sets proc.ProcessFunc and calls start.
func setup(t *testing.T, o options) *testBundle {
	t.Helper()
	s := memsqs.New()
	url, dlq := memsqs.NewQueue(t, s, o.fifo, o.attrs, o.maxReceive)
	b := &testBundle{
		sqs: s, rec: &recordingSQS{SQS: s}, url: url, dlq: dlq,
		proc: &fakeProcessor{ProcessFunc: func(context.Context, effect.Message, process.Hooks) process.Result { return deleted() }},
		obs:  &testObserver{}, logs: &syncBuffer{},
	}
	q := Queue{URL: url, FIFO: o.fifo, Visibility: 30 * time.Second}
	if o.queue != nil {
		o.queue(&q)
	}
	b.cfg = Config{
		Client: b.rec, Queues: []Queue{q}, Processor: b.proc, Concurrency: 8,
		WaitTime: time.Second, AckDelay: 5 * time.Millisecond, RetryBase: time.Millisecond, RetryMax: time.Millisecond,
		ShutdownTimeout: 10 * time.Second, Observer: b.obs,
		Log: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if o.config != nil {
		o.config(&b.cfg)
	}
	t.Cleanup(func() {
		if b.cancel != nil {
			b.stop(t)
		}
		if t.Failed() {
			t.Logf("pool log:\n%s", b.logs.String())
		}
	})
	return b
}

func (b *testBundle) start(t *testing.T) {
	t.Helper()
	p, err := New(b.cfg)
	require.NoError(t, err)
	b.pool = p
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go func() {
		p.Run(ctx)
		close(b.done)
	}()
}

// stop cancels the pool's context and waits for Run to return.
func (b *testBundle) stop(t *testing.T) {
	t.Helper()
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func (b *testBundle) sendFIFO(t *testing.T, group string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		_, err := b.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: &b.url, MessageBody: aws.String(body), MessageGroupId: aws.String(group),
			MessageDeduplicationId: aws.String(body),
			MessageAttributes:      map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("t-" + group)}},
		})
		require.NoError(t, err)
	}
}

// sendFIFOAtOnce sends a group's messages in one SendMessageBatch, so that
// a waiting long poll sees them all: sent one by one, a poll can wake
// between two sends and take only the first.
func (b *testBundle) sendFIFOAtOnce(t *testing.T, group string, bodies ...string) {
	t.Helper()
	entries := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i, body := range bodies {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body), MessageGroupId: aws.String(group),
			MessageDeduplicationId: aws.String(body),
		}
	}
	out, err := b.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &b.url, Entries: entries})
	require.NoError(t, err)
	require.Empty(t, out.Failed)
}

func sqsSend(url, body string) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}
}

func (b *testBundle) send(t *testing.T, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		_, err := b.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &b.url, MessageBody: aws.String(body)})
		require.NoError(t, err)
	}
}

// counts returns the queue's visible and in-flight message counts.
func (b *testBundle) counts(t *testing.T, url string) (visible, inflight int) {
	t.Helper()
	out, err := b.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inflight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inflight
}

func (b *testBundle) receiveNow(t *testing.T, url string) []types.Message {
	t.Helper()
	out, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	require.NoError(t, err)
	return out.Messages
}

// tracker records handler runs: concurrency overall and per group, and the
// order of runs per group.
type tracker struct {
	mu              sync.Mutex
	running         int
	maxRunning      int
	groupRunning    map[string]int
	maxGroupRunning int
	order           map[string][]string // group -> bodies, in the order runs started
	runs            map[string]int      // body -> runs
	receiveCounts   map[string][]int    // body -> ApproximateReceiveCount of each run
	completed       int
	want            int
	allDone         chan struct{}
}

func newTracker(want int) *tracker {
	return &tracker{
		groupRunning: map[string]int{}, order: map[string][]string{}, runs: map[string]int{},
		receiveCounts: map[string][]int{}, want: want, allDone: make(chan struct{}),
	}
}

// begin records the start of a run; end records its end, counting it as
// completed when the message was deleted.
func (tr *tracker) begin(m effect.Message) (end func(r process.Result) process.Result) {
	tr.mu.Lock()
	tr.running++
	tr.maxRunning = max(tr.maxRunning, tr.running)
	tr.groupRunning[m.Group]++
	if m.Group != "" {
		tr.maxGroupRunning = max(tr.maxGroupRunning, tr.groupRunning[m.Group])
	}
	tr.order[m.Group] = append(tr.order[m.Group], m.Body)
	tr.runs[m.Body]++
	tr.receiveCounts[m.Body] = append(tr.receiveCounts[m.Body], m.ReceiveCount)
	tr.mu.Unlock()
	return func(r process.Result) process.Result {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.running--
		tr.groupRunning[m.Group]--
		if r.Action == process.Delete {
			tr.completed++
			if tr.completed == tr.want {
				close(tr.allDone)
			}
		}
		return r
	}
}

func (tr *tracker) snapshot(f func(tr *tracker)) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	f(tr)
}

func waitFor(t *testing.T, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// eventually polls cond, for conditions no component signals.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}
