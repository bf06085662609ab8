package sqsevent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
)

const (
	fifoARN     = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
	standardARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
)

// recorder is the test effect: it records what ran, in order, and fails
// bodies that ask for it ("poison" permanently, "flaky" retryably).
type recorder struct {
	mu    sync.Mutex
	ran   []string // message ids
	apply func(ctx context.Context, in effect.Input) error
}

func (r *recorder) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	r.mu.Lock()
	r.ran = append(r.ran, in.Message.ID)
	r.mu.Unlock()
	switch in.Message.Body {
	case "poison":
		return effect.Output{}, effect.Permanent(errors.New("poison"))
	case "flaky":
		return effect.Output{}, errors.New("flaky")
	}
	if r.apply != nil {
		if err := r.apply(ctx, in); err != nil {
			return effect.Output{}, err
		}
	}
	return effect.Output{Result: []byte(`{"ok":true}`)}, nil
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

type bundle struct {
	db    *memdynamo.DB
	store *dedup.Store
	table string
	eff   *recorder
	logs  *syncBuffer
	proc  *process.Processor
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (s *syncBuffer) lines(msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(s.b.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// setup returns a handler over an in-memory dedup table; edit adjusts its
// config before New.
func setup(t *testing.T, edit func(*Config)) (*Handler, *bundle) {
	t.Helper()
	ctx := context.Background()
	db := memdynamo.New()
	table := "dedup-" + strings.ReplaceAll(t.Name(), "/", "-")
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	})
	require.NoError(t, err)
	b := &bundle{db: db, store: dedup.NewStore(db, table), table: table, eff: &recorder{}, logs: &syncBuffer{}}
	require.NoError(t, b.store.Check(ctx))
	log := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.proc = &process.Processor{
		Store: b.store, Effect: b.eff, TTL: time.Hour, Lease: 30 * time.Second, Log: log,
		Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "test", Queue: m.QueueName} },
	}
	cfg := Config{Processor: b.proc, Log: log}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", b.logs.b.String())
		}
	})
	return h, b
}

// msg builds a record as Lambda delivers it from arn. FIFO records get a
// group, a dedup id and a sequence number.
func msg(arn, id, group, body string, seq int) events.SQSMessage {
	m := events.SQSMessage{
		MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSourceARN: arn, EventSource: "aws:sqs", AWSRegion: "eu-west-1",
		Attributes: map[string]string{
			"ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		},
	}
	if strings.HasSuffix(arn, ".fifo") {
		m.Attributes["MessageGroupId"] = group
		m.Attributes["MessageDeduplicationId"] = "dd-" + id
		m.Attributes["SequenceNumber"] = fmt.Sprintf("%020d", seq)
	}
	return m
}

func withKey(m events.SQSMessage, key string) events.SQSMessage {
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		dedup.IdempotencyKeyAttribute: {StringValue: aws.String(key), DataType: "String"},
	}
	return m
}

func failures(r events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func invoke(t *testing.T, h *Handler, timeout time.Duration, recs ...events.SQSMessage) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := h.Handle(ctx, events.SQSEvent{Records: recs})
	require.NoError(t, err)
	return failures(resp)
}

// order returns the ids of ran that are in want's set, keeping ran's order.
func only(ran []string, keep ...string) []string {
	set := map[string]bool{}
	for _, k := range keep {
		set[k] = true
	}
	out := []string{}
	for _, id := range ran {
		if set[id] {
			out = append(out, id)
		}
	}
	return out
}

// TestFIFOFailureTakesTheRestOfItsGroup: a poison message in the middle of a
// group is reported with every later message of its group, which never ran;
// the other groups succeed, each in order.
func TestFIFOFailureTakesTheRestOfItsGroup(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil)
	recs := []events.SQSMessage{
		msg(fifoARN, "a1", "A", "a1", 1),
		msg(fifoARN, "b1", "B", "b1", 2),
		msg(fifoARN, "a2", "A", "poison", 3),
		msg(fifoARN, "c1", "C", "c1", 4),
		msg(fifoARN, "a3", "A", "a3", 5),
		msg(fifoARN, "b2", "B", "b2", 6),
		msg(fifoARN, "a4", "A", "a4", 7),
	}
	require.Equal(t, []string{"a2", "a3", "a4"}, invoke(t, h, time.Minute, recs...))
	ran := b.eff.ids()
	require.ElementsMatch(t, []string{"a1", "b1", "a2", "c1", "b2"}, ran, "a3 and a4 never ran")
	require.Equal(t, []string{"a1", "a2"}, only(ran, "a1", "a2", "a3", "a4"))
	require.Equal(t, []string{"b1", "b2"}, only(ran, "b1", "b2"))

	errs := b.logs.lines("permanent failure: left to the queue's redrive policy")
	require.Len(t, errs, 1)
	require.Equal(t, "ERROR", errs[0]["level"])
	require.Equal(t, "a2", errs[0]["message_id"])
	done := b.logs.lines("batch done")
	require.Len(t, done, 1)
	require.EqualValues(t, 4, done[0]["applied"])
	require.EqualValues(t, 3, done[0]["batch_item_failures"])
	require.EqualValues(t, 2, done[0]["not_started"])
}

// TestFIFOFailRestBatch: with FailRestBatch the batch runs in order, one
// message at a time, and a failure reports every later message of the batch.
func TestFIFOFailRestBatch(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(c *Config) { c.FailRest = FailRestBatch })
	var running, most int
	var mu sync.Mutex
	b.eff.apply = func(context.Context, effect.Input) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}
	recs := []events.SQSMessage{
		msg(fifoARN, "a1", "A", "a1", 1),
		msg(fifoARN, "b1", "B", "b1", 2),
		msg(fifoARN, "c1", "C", "c1", 3),
		msg(fifoARN, "a2", "A", "poison", 4),
		msg(fifoARN, "b2", "B", "b2", 5),
		msg(fifoARN, "d1", "D", "d1", 6),
	}
	require.Equal(t, []string{"a2", "b2", "d1"}, invoke(t, h, time.Minute, recs...))
	require.Equal(t, []string{"a1", "b1", "c1", "a2"}, b.eff.ids(), "in batch order, nothing after the failure")
	require.Equal(t, 1, most, "one message at a time")
}

// TestStandardQueueMessagesStandAlone: in a standard queue a failure takes
// nothing with it.
func TestStandardQueueMessagesStandAlone(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil)
	recs := []events.SQSMessage{
		msg(standardARN, "m1", "", "m1", 0),
		msg(standardARN, "m2", "", "poison", 0),
		msg(standardARN, "m3", "", "m3", 0),
		msg(standardARN, "m4", "", "flaky", 0),
		msg(standardARN, "m5", "", "m5", 0),
	}
	require.Equal(t, []string{"m2", "m4"}, invoke(t, h, time.Minute, recs...))
	require.ElementsMatch(t, []string{"m1", "m2", "m3", "m4", "m5"}, b.eff.ids())
	retries := b.logs.lines("retry: reported as a batch item failure")
	require.Len(t, retries, 1)
	require.Equal(t, "m4", retries[0]["message_id"])
}

// TestDuplicatesAreSuccesses: a redelivered batch and a producer retry (same
// idempotency-key, new message) are successes, and the effect does not run
// again.
func TestDuplicatesAreSuccesses(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil)
	recs := []events.SQSMessage{
		withKey(msg(fifoARN, "a1", "A", "deposit 1", 1), "k1"),
		withKey(msg(fifoARN, "a2", "A", "deposit 2", 2), "k2"),
		withKey(msg(fifoARN, "a3", "A", "deposit 1", 3), "k1"), // producer retry
	}
	require.Empty(t, invoke(t, h, time.Minute, recs...))
	require.Equal(t, []string{"a1", "a2"}, b.eff.ids())
	// Lambda invokes at least once: the same batch again.
	require.Empty(t, invoke(t, h, time.Minute, recs...))
	require.Equal(t, []string{"a1", "a2"}, b.eff.ids())
	done := b.logs.lines("batch done")
	require.Len(t, done, 2)
	require.EqualValues(t, 1, done[0]["duplicates"])
	require.EqualValues(t, 3, done[1]["duplicates"])
	// Each duplicate leaves a line at Info with its key.
	dups := b.logs.lines("duplicate: not run again")
	require.Len(t, dups, 4)
	require.Equal(t, "INFO", dups[0]["level"])
	require.Equal(t, "test#orders.fifo#k1", dups[0]["dedup_key"])
}

// TestBusyAndConflictAreFailures: a key held by another worker's live lease,
// and a key completed for a different payload, are reported and not run; the
// conflict is logged as an error.
func TestBusyAndConflictAreFailures(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil)
	ctx := context.Background()
	scope := dedup.Scope{Namespace: "test", Queue: "orders.fifo"}
	_, err := b.store.Claim(ctx, dedup.ClaimRequest{
		Key: scope.Key("A", "held"), PayloadSHA256: dedup.PayloadHash("x"), Lease: time.Hour, TTL: time.Hour,
	})
	require.NoError(t, err)
	c, err := b.store.Claim(ctx, dedup.ClaimRequest{
		Key: scope.Key("B", "used"), PayloadSHA256: dedup.PayloadHash("first payload"), Lease: time.Hour, TTL: time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, b.store.Complete(ctx, c, nil, time.Hour))

	recs := []events.SQSMessage{
		withKey(msg(fifoARN, "a1", "A", "x", 1), "held"),
		withKey(msg(fifoARN, "b1", "B", "another payload", 2), "used"),
		msg(fifoARN, "c1", "C", "c1", 3),
	}
	require.Equal(t, []string{"a1", "b1"}, invoke(t, h, time.Minute, recs...))
	require.Equal(t, []string{"c1"}, b.eff.ids())
	perm := b.logs.lines("permanent failure: left to the queue's redrive policy")
	require.Len(t, perm, 1)
	require.Equal(t, "conflict", perm[0]["outcome"])
	require.Equal(t, "ERROR", perm[0]["level"])
	retry := b.logs.lines("retry: reported as a batch item failure")
	require.Len(t, retry, 1)
	require.Equal(t, "busy", retry[0]["outcome"])
	done := b.logs.lines("batch done")[0]
	require.EqualValues(t, 1, done["busy"])
	require.EqualValues(t, 1, done["conflicts"])
}

// TestLeaseEndsBeforeTheDeadline: the claim's lease ends LeaseMargin before
// the invocation's deadline, the effect's context is cancelled then, and the
// lease is never extended past it (virtual time: exact).
func TestLeaseEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const margin = 1500 * time.Millisecond
		h, b := setup(t, func(c *Config) { c.LeaseMargin = margin; c.MinLease = 100 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		deadline, _ := ctx.Deadline()
		var leaseUntil []int64
		var effDeadline time.Time
		b.eff.apply = func(ectx context.Context, in effect.Input) error {
			effDeadline, _ = ectx.Deadline()
			leaseUntil = append(leaseUntil, b.leaseUntil(t, in.Key))
			<-ectx.Done() // a slow effect: cancelled when the lease ends
			leaseUntil = append(leaseUntil, b.leaseUntil(t, in.Key))
			return ectx.Err()
		}
		resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg(fifoARN, "a1", "A", "slow", 1)}})
		require.NoError(t, err)
		require.Equal(t, []string{"a1"}, failures(resp), "the cancelled effect is retried")
		require.NoError(t, ctx.Err(), "the handler returned before the deadline")
		require.Equal(t, []int64{deadline.Add(-margin).UnixMilli(), deadline.Add(-margin).UnixMilli()}, leaseUntil,
			"the lease ends LeaseMargin before the deadline, never extended")
		require.Equal(t, deadline.Add(-margin), effDeadline)
	})
}

// TestOptimisticFallbackLeaseEndsBeforeTheDeadline: an optimistic effect
// that fails is run again under a claim; that claim's lease ends where any
// other's does, LeaseMargin before the deadline, however long the first run
// took.
func TestOptimisticFallbackLeaseEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const margin = 2 * time.Second
		h, b := setup(t, func(c *Config) { c.LeaseMargin = margin })
		b.proc.Optimistic = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		var runs int
		var leaseUntil int64
		b.eff.apply = func(ectx context.Context, in effect.Input) error {
			runs++
			if runs == 1 {
				time.Sleep(3 * time.Second) // the optimistic run, then it fails
				return errors.New("downstream unavailable")
			}
			leaseUntil = b.leaseUntil(t, in.Key)
			return nil
		}
		resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg(fifoARN, "a1", "A", "x", 1)}})
		require.NoError(t, err)
		require.Empty(t, failures(resp))
		require.Equal(t, 2, runs, "optimistic, then under a claim")
		require.Equal(t, deadline.Add(-margin).UnixMilli(), leaseUntil, "the claim's lease ends LeaseMargin before the deadline")
	})
}

// leaseUntil reads the lease_until of key's record.
func (b *bundle) leaseUntil(t *testing.T, key string) int64 {
	t.Helper()
	out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(b.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: key}},
	})
	require.NoError(t, err)
	n, err := strconv.ParseInt(out.Item["lease_until"].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
	require.NoError(t, err)
	return n
}

// TestTooLittleTimeLeft: a message is not started when less than MinLease
// is left before the margin; it is reported, unrun.
func TestTooLittleTimeLeft(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil) // margin 2s
	require.Equal(t, []string{"a1", "a2"}, invoke(t, h, 2500*time.Millisecond,
		msg(fifoARN, "a1", "A", "a1", 1), msg(fifoARN, "a2", "A", "a2", 2)))
	require.Empty(t, b.eff.ids())
	require.Len(t, b.logs.lines("not started: too little time left before the invocation's deadline"), 1)
}

// TestGroupsRunInParallel: the first messages of two groups meet inside the
// effect, which only works if they run at the same time.
func TestGroupsRunInParallel(t *testing.T) {
	t.Parallel()
	h, b := setup(t, nil)
	var wg sync.WaitGroup
	wg.Add(2)
	b.eff.apply = func(ctx context.Context, in effect.Input) error {
		if in.Message.Body != "meet" {
			return nil
		}
		wg.Done()
		met := make(chan struct{})
		go func() { wg.Wait(); close(met) }()
		select {
		case <-met:
			return nil
		case <-time.After(5 * time.Second):
			return effect.Permanent(errors.New("the other group never started"))
		}
	}
	require.Empty(t, invoke(t, h, time.Minute,
		msg(fifoARN, "a1", "A", "meet", 1), msg(fifoARN, "a2", "A", "a2", 2),
		msg(fifoARN, "b1", "B", "meet", 3), msg(fifoARN, "b2", "B", "b2", 4)))
	require.Len(t, b.eff.ids(), 4)
}

// TestRecordsAsLambdaSendsThem: what the effect sees of a record, and a
// record that is not from SQS.
func TestRecordsAsLambdaSendsThem(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(c *Config) {
		c.QueueURL = func(arn string) string {
			if arn == fifoARN {
				return "http://127.0.0.1:9324/123456789012/orders.fifo"
			}
			return ""
		}
	})
	var seen []effect.Input
	var mu sync.Mutex
	b.eff.apply = func(_ context.Context, in effect.Input) error {
		mu.Lock()
		seen = append(seen, in)
		mu.Unlock()
		return nil
	}
	m := withKey(msg(fifoARN, "a1", "A", "body", 7), "order-1")
	m.Attributes["ApproximateReceiveCount"] = "3"
	bad := msg("arn:aws:kinesis:eu-west-1:123456789012:stream/x", "x1", "", "x", 0)
	require.Equal(t, []string{"x1"}, invoke(t, h, time.Minute, m, msg(standardARN, "s1", "", "s", 0), bad))
	require.Len(t, seen, 2)
	byID := map[string]effect.Input{}
	for _, in := range seen {
		byID[in.Message.ID] = in
	}
	in := byID["a1"]
	require.Equal(t, "test#orders.fifo#order-1", in.Key)
	require.Equal(t, "orders.fifo", in.Message.QueueName)
	require.Equal(t, "http://127.0.0.1:9324/123456789012/orders.fifo", in.Message.QueueURL)
	require.Equal(t, "A", in.Message.Group)
	require.Equal(t, "dd-a1", in.Message.DedupID)
	require.Equal(t, fmt.Sprintf("%020d", 7), in.Message.SequenceNumber)
	require.Equal(t, 3, in.Message.ReceiveCount)
	require.False(t, in.Message.SentAt.IsZero())
	require.Equal(t, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", byID["s1"].Message.QueueURL)
	require.Equal(t, "test#orders#s1", byID["s1"].Key)
}

// TestMoveToDLQ: a permanent failure moved to the dead-letter queue is not
// reported (the mapping deletes it), the rest of its group still is; a move
// that fails leaves the record reported.
func TestMoveToDLQ(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var moved []string
	fail := false
	h, b := setup(t, func(c *Config) {
		c.MoveToDLQ = func(ctx context.Context, rec events.SQSMessage, _ error) error {
			_, has := ctx.Deadline()
			require.True(t, has, "bounded")
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return errors.New("AccessDenied")
			}
			moved = append(moved, rec.MessageId)
			return nil
		}
	})
	recs := []events.SQSMessage{
		msg(fifoARN, "a1", "A", "a1", 1),
		msg(fifoARN, "a2", "A", "poison", 2),
		msg(fifoARN, "b1", "B", "b1", 3),
		msg(fifoARN, "a3", "A", "a3", 4),
	}
	// a2 left for the DLQ, so its group goes on: a3 is not reported (which
	// would count a receive against it and, with the next failure, more).
	require.Empty(t, invoke(t, h, time.Minute, recs...))
	require.Equal(t, []string{"a2"}, moved)
	done := b.logs.lines("done")
	var order []any
	for _, l := range done {
		order = append(order, l["message_id"])
	}
	require.Subset(t, order, []any{"a1", "a3", "b1"})
	require.Len(t, b.logs.lines("permanent failure: moved to the dead-letter queue"), 1)
	require.EqualValues(t, 1, b.logs.lines("batch done")[0]["moved_to_dlq"])

	mu.Lock()
	fail = true
	mu.Unlock()
	require.Equal(t, []string{"p1"}, invoke(t, h, time.Minute, msg(standardARN, "p1", "", "poison", 0)))
	// A FIFO move that fails holds the rest of the group back.
	require.Equal(t, []string{"c1", "c2"}, invoke(t, h, time.Minute, msg(fifoARN, "c1", "C", "poison", 5), msg(fifoARN, "c2", "C", "c2", 6)))
	require.Len(t, b.logs.lines("cannot move to the dead-letter queue; leaving it to the redrive policy"), 2)
	require.Len(t, b.logs.lines("permanent failure: left to the queue's redrive policy"), 2)
}

func TestConfigAndParse(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.Error(t, err)
	for in, want := range map[string]FailRest{"": FailRestGroup, "group": FailRestGroup, "batch": FailRestBatch} {
		got, err := ParseFailRest(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err = ParseFailRest("all")
	require.ErrorContains(t, err, "want group")
	require.Equal(t, "orders.fifo", QueueName(fifoARN))
	require.True(t, IsFIFO(fifoARN))
	require.False(t, IsFIFO(standardARN))
	require.Empty(t, QueueName("orders"))
	require.Equal(t, "https://sqs.cn-north-1.amazonaws.com.cn/1/q", urlFromARN("arn:aws-cn:sqs:cn-north-1:1:q"))
}
