package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/internal/telemetry"
)

// Latencies is the AWS-like model: how long each operation takes from the
// client's side in the same region, before jitter. The figures are the
// commonly measured in-region round trips (SDK to service endpoint over
// TLS, warm connection), not AWS's guarantees: SQS answers a request in
// 10 to 20 ms, DynamoDB a single-item read in a few ms and a write in 5 to
// 10 ms; a transaction coordinates its items and takes longer.
var Latencies = map[string]time.Duration{
	"SQS.*":                       15 * time.Millisecond,
	"DynamoDB.GetItem":            5 * time.Millisecond,
	"DynamoDB.Query":              6 * time.Millisecond,
	"DynamoDB.Scan":               10 * time.Millisecond,
	"DynamoDB.BatchGetItem":       8 * time.Millisecond,
	"DynamoDB.PutItem":            8 * time.Millisecond,
	"DynamoDB.UpdateItem":         8 * time.Millisecond,
	"DynamoDB.DeleteItem":         8 * time.Millisecond,
	"DynamoDB.TransactWriteItems": 12 * time.Millisecond,
	"DynamoDB.DescribeTable":      5 * time.Millisecond,
	"DynamoDB.DescribeTimeToLive": 5 * time.Millisecond,
	"DynamoDB.*":                  8 * time.Millisecond,
}

// DefaultJitter is the spread of every held call: uniform in ±20 % of the
// operation's latency.
const DefaultJitter = 0.2

// Latency draws the time each call is held for: the operation's latency in
// Latencies, times Scale, spread uniformly over ±Jitter, from a seeded
// generator so that two runs with the same seed hold the same sequence.
type Latency struct {
	Scale  float64 // 0: no latency (emulator speed); 1: the model
	Jitter float64 // fraction, e.g. 0.2

	mu  sync.Mutex
	rng *rand.Rand
}

// NewLatency returns the model at scale with jitter, seeded.
func NewLatency(scale, jitter float64, seed uint64) *Latency {
	return &Latency{Scale: scale, Jitter: jitter, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Base is an operation's modelled latency before jitter and scale.
func Base(service, op string) time.Duration {
	if d, ok := Latencies[service+"."+op]; ok {
		return d
	}
	return Latencies[service+".*"]
}

// Draw returns how long to hold one call of service's op.
func (l *Latency) Draw(service, op string) time.Duration {
	if l == nil || l.Scale <= 0 {
		return 0
	}
	base := float64(Base(service, op)) * l.Scale
	l.mu.Lock()
	u := l.rng.Float64()
	l.mu.Unlock()
	return time.Duration(base * (1 + l.Jitter*(2*u-1)))
}

// hold waits d, or until ctx ends.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return sleep(ctx, d)
}

// counter counts requests by service and operation and write units as
// AWS bills them, exported under the worker's metric names so that the
// harness reads a consumer on the fakes as it reads the worker.
type counter struct {
	vec   *prometheus.CounterVec
	held  *prometheus.CounterVec // seconds calls were held, by service and operation
	units prometheus.Counter

	mu     sync.Mutex
	counts map[string]float64 // by "Service.Operation"
	wru    float64
}

func newCounter(reg prometheus.Registerer) *counter {
	c := &counter{
		counts: map[string]float64{},
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "exactly", Name: "aws_requests_total",
			Help: "requests to the latency-held fakes by service and operation"}, []string{"service", "operation"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "exactly", Name: "bench_held_seconds_total",
			Help: "seconds the latency layer held calls to the fakes, by service and operation"}, []string{"service", "operation"}),
		units: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: "dynamodb_write_units_total",
			Help: "write units of the requests to the fake DynamoDB, as AWS bills them"}),
	}
	reg.MustRegister(c.vec, c.held, c.units)
	return c
}

// sample returns the counts as a Sample (no "applied": the caller's).
func (c *counter) sample() Sample {
	s := newSample(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.counts {
		s.Requests[k] = v
	}
	s.Counts["dynamodb_wru"] = c.wru
	return s
}

// call holds half the call's latency before it and half after (the
// request's and the answer's trips), and counts it.
func call[O any](ctx context.Context, l *Latency, c *counter, service, op string, in any, f func() (O, error)) (O, error) {
	d := l.Draw(service, op)
	c.vec.WithLabelValues(service, op).Inc()
	c.mu.Lock()
	c.counts[service+"."+op]++
	c.mu.Unlock()
	var zero O
	began := time.Now()
	defer func() { c.held.WithLabelValues(service, op).Add(time.Since(began).Seconds()) }()
	if err := hold(ctx, d/2); err != nil {
		return zero, err
	}
	out, err := f()
	if n := telemetry.WriteUnits(in); n > 0 && billedWrite(err) {
		c.units.Add(float64(n))
		c.mu.Lock()
		c.wru += float64(n)
		c.mu.Unlock()
	}
	if herr := hold(ctx, d-d/2); herr != nil && err == nil {
		return zero, herr
	}
	return out, err
}

// billedWrite reports whether a write that ended with err is billed: it
// succeeded, or its condition was evaluated and refused.
func billedWrite(err error) bool {
	if err == nil {
		return true
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	var tce *ddbtypes.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

// fakeSQS is the SQS methods the worker, the hand-written consumer and the
// relay call.
type fakeSQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// fakeDynamoDB is the DynamoDB methods the worker, the hand-written
// consumer, the outbox and its relay call.
type fakeDynamoDB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// heldSQS holds every call to the fake for the modelled latency.
type heldSQS struct {
	s  fakeSQS
	l  *Latency
	c  *counter
	st *states // nil: not timed
}

func (h *heldSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := call(ctx, h.l, h.c, "SQS", "ReceiveMessage", in, func() (*sqs.ReceiveMessageOutput, error) { return h.s.ReceiveMessage(ctx, in, o...) })
	if err == nil {
		h.st.receivedNow(out.Messages)
	}
	return out, err
}

func (h *heldSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "DeleteMessage", in, func() (*sqs.DeleteMessageOutput, error) { return h.s.DeleteMessage(ctx, in, o...) })
}

func (h *heldSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	h.st.deleting(in.Entries)
	return call(ctx, h.l, h.c, "SQS", "DeleteMessageBatch", in, func() (*sqs.DeleteMessageBatchOutput, error) { return h.s.DeleteMessageBatch(ctx, in, o...) })
}

func (h *heldSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "ChangeMessageVisibility", in, func() (*sqs.ChangeMessageVisibilityOutput, error) { return h.s.ChangeMessageVisibility(ctx, in, o...) })
}

func (h *heldSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "ChangeMessageVisibilityBatch", in, func() (*sqs.ChangeMessageVisibilityBatchOutput, error) {
		return h.s.ChangeMessageVisibilityBatch(ctx, in, o...)
	})
}

func (h *heldSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "GetQueueAttributes", in, func() (*sqs.GetQueueAttributesOutput, error) { return h.s.GetQueueAttributes(ctx, in, o...) })
}

func (h *heldSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	return call(ctx, h.l, h.c, "SQS", "GetQueueUrl", in, func() (*sqs.GetQueueUrlOutput, error) { return h.s.GetQueueUrl(ctx, in, o...) })
}

func (h *heldSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "SendMessage", in, func() (*sqs.SendMessageOutput, error) { return h.s.SendMessage(ctx, in, o...) })
}

func (h *heldSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return call(ctx, h.l, h.c, "SQS", "SendMessageBatch", in, func() (*sqs.SendMessageBatchOutput, error) { return h.s.SendMessageBatch(ctx, in, o...) })
}

// heldDynamoDB holds every call to the fake for the modelled latency.
type heldDynamoDB struct {
	d fakeDynamoDB
	l *Latency
	c *counter
}

func (h *heldDynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "PutItem", in, func() (*dynamodb.PutItemOutput, error) { return h.d.PutItem(ctx, in, o...) })
}

func (h *heldDynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "UpdateItem", in, func() (*dynamodb.UpdateItemOutput, error) { return h.d.UpdateItem(ctx, in, o...) })
}

func (h *heldDynamoDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "DeleteItem", in, func() (*dynamodb.DeleteItemOutput, error) { return h.d.DeleteItem(ctx, in, o...) })
}

func (h *heldDynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "GetItem", in, func() (*dynamodb.GetItemOutput, error) { return h.d.GetItem(ctx, in, o...) })
}

func (h *heldDynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "Query", in, func() (*dynamodb.QueryOutput, error) { return h.d.Query(ctx, in, o...) })
}

func (h *heldDynamoDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "BatchGetItem", in, func() (*dynamodb.BatchGetItemOutput, error) { return h.d.BatchGetItem(ctx, in, o...) })
}

func (h *heldDynamoDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "TransactWriteItems", in, func() (*dynamodb.TransactWriteItemsOutput, error) { return h.d.TransactWriteItems(ctx, in, o...) })
}

func (h *heldDynamoDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "DescribeTable", in, func() (*dynamodb.DescribeTableOutput, error) { return h.d.DescribeTable(ctx, in, o...) })
}

func (h *heldDynamoDB) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return call(ctx, h.l, h.c, "DynamoDB", "DescribeTimeToLive", in, func() (*dynamodb.DescribeTimeToLiveOutput, error) { return h.d.DescribeTimeToLive(ctx, in, o...) })
}
