// Package exactlytest tests effects and workers without AWS and without
// emulators, as rivertest does for river: an in-memory DynamoDB and SQS
// (the same fakes the project's own fast tests use, held to DynamoDB
// Local's and the SQS emulators' behaviour by shared contract suites), and
// a Harness that runs an effect through the real exactly-once path (key,
// claim, effect, commit) and asserts what happened: applied once, a
// duplicate absorbed, a conflict, a retry, a permanent failure.
//
//	h := exactlytest.New(t, myEffect, exactlytest.KeySource("json:/order_id"))
//	h.RequireApplied(exactlytest.Msg(`{"order_id":"o-1"}`))
//	h.RequireDuplicate(exactlytest.Msg(`{"order_id":"o-1"}`))
//	h.RequireConflict(exactlytest.Msg(`{"order_id":"o-1","amount":2}`))
//
// For a whole Worker, pass [NewSQS] and [NewDynamoDB] to exactly.Config, and
// testing/synctest makes its leases and timeouts cost no wall time. [SQS]
// and [DynamoDB] have the methods of the SDK's clients, so they go wherever
// a client goes (exactly.Config, idempotency.Config, outbox.New,
// outbox.Relay); [NewEmptyDynamoDB] gives one without tables, for code
// outside a test. [NewSNS] is an in-memory SNS delivering to an [SQS]'s
// queues, for fan-out through topics (outbox.Relay.SNS).
package exactlytest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// Table is the name of the dedup table NewDynamoDB creates.
const Table = "exactly-dedup"

// NewDynamoDB returns an in-memory DynamoDB holding an empty dedup table
// named Table (partition key pk, TTL on expires_at).
func NewDynamoDB(t testing.TB) *DynamoDB {
	t.Helper()
	db := NewEmptyDynamoDB()
	CreateTable(t, db, Table)
	_, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(Table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil {
		t.Fatalf("exactlytest: enable TTL: %v", err)
	}
	return db
}

// CreateTable creates a table keyed by pk (a string), for an effect's own
// writes.
func CreateTable(t testing.TB, db *DynamoDB, name string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatalf("exactlytest: create table %s: %v", name, err)
	}
}

// NewQueue creates a queue on s (FIFO when name ends in .fifo) with a
// visibility timeout of 30 s and, when maxReceive > 0, a dead-letter queue
// of the same kind after maxReceive receives. It returns both URLs.
func NewQueue(t testing.TB, s *SQS, name string, maxReceive int) (url, dlq string) {
	t.Helper()
	ctx := context.Background()
	attrs := map[string]string{"VisibilityTimeout": "30"}
	fifo := len(name) > 5 && name[len(name)-5:] == ".fifo"
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	if maxReceive > 0 {
		dattrs := map[string]string{}
		dname := name + "-dlq"
		if fifo {
			dattrs["FifoQueue"] = "true"
			dname = name[:len(name)-5] + "-dlq.fifo"
		}
		out, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &dname, Attributes: dattrs})
		if err != nil {
			t.Fatalf("exactlytest: create %s: %v", dname, err)
		}
		dlq = aws.ToString(out.QueueUrl)
		a, err := s.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("exactlytest: %v", err)
		}
		attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"` + a.Attributes["QueueArn"] + `","maxReceiveCount":"` + strconv.Itoa(maxReceive) + `"}`
	}
	out, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("exactlytest: create %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl), dlq
}

// Option tunes a Harness.
type Option func(*Harness) error

// KeySource sets where a message's dedup key comes from, as
// exactly.Config.KeySource: auto (default), attr:NAME, json:/pointer, body.
func KeySource(s string) Option {
	return func(h *Harness) (err error) {
		h.proc.Keys, err = dedup.ParseKeySource(s)
		return err
	}
}

// PayloadHash sets what tells a duplicate from a conflict, as
// exactly.Config.PayloadHash: body (default), json:/a,/b, none.
func PayloadHash(s string) Option {
	return func(h *Harness) (err error) {
		h.proc.Payload, err = dedup.ParsePayloadSource(s)
		return err
	}
}

// Commit sets the commit mode, as exactly.Config.Commit does for a worker.
// By default the worker's: optimistic for an effect.WritesOnly, claim for
// any other. In optimistic mode the effect runs before the ledger is asked,
// so a duplicate or a conflict runs it too (Delivery.Ran is 1) and its
// writes are dropped; transactional and optimistic need an
// effect.WritesOnly, carried an effect.CarriesRecord.
func Commit(mode exactly.CommitMode) Option {
	return func(h *Harness) error {
		h.proc.Carried, h.proc.WritesOnly = false, mode == exactly.CommitTransactional
		switch mode {
		case exactly.CommitClaim, exactly.CommitTransactional:
			h.proc.Optimistic = false
		case exactly.CommitOptimistic:
			h.proc.Optimistic = true
		case exactly.CommitCarried:
			if !h.carries {
				return fmt.Errorf("commit mode %s needs an effect.CarriesRecord", mode)
			}
			h.proc.Optimistic, h.proc.Carried, h.proc.Carrier = true, true, h.carrier
		default:
			return fmt.Errorf("commit mode %q: want claim, transactional, optimistic or carried", mode)
		}
		if mode != exactly.CommitClaim && !h.writesOnly {
			return fmt.Errorf("commit mode %s needs an effect.WritesOnly", mode)
		}
		return nil
	}
}

// WithDynamoDB runs the harness on db (made by NewDynamoDB), for an effect
// that reads or writes tables of its own there.
func WithDynamoDB(db *DynamoDB) Option {
	return func(h *Harness) error {
		h.DynamoDB = db
		h.proc.Store = dedup.NewStore(db, Table)
		return nil
	}
}

// Harness runs an effect through the worker's real exactly-once path on an
// in-memory ledger, one delivery at a time.
type Harness struct {
	t testing.TB
	// DynamoDB holds the dedup table (and any table of the effect's).
	DynamoDB *DynamoDB
	proc     *process.Processor
	runs     atomic.Int64
	// writesOnly: the effect is an effect.WritesOnly; carries: an
	// effect.CarriesRecord.
	writesOnly, carries bool
	carrier             int // the effect's Carrier()
}

// New returns a Harness running eff.
func New(t testing.TB, eff effect.Effect, opts ...Option) *Harness {
	t.Helper()
	h := &Harness{t: t}
	_, h.writesOnly = eff.(effect.WritesOnly)
	if c, ok := eff.(effect.CarriesRecord); ok {
		h.carries, h.carrier = true, c.Carrier()
	}
	keys, _ := dedup.ParseKeySource("auto")
	h.proc = &process.Processor{
		Keys: keys, TTL: 24 * time.Hour, Lease: 30 * time.Second, Log: slog.New(slog.DiscardHandler),
		Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "exactly", Queue: m.QueueName} },
		Effect: effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			h.runs.Add(1)
			return eff.Apply(ctx, in)
		}),
		Optimistic: h.writesOnly,
	}
	if err := WithDynamoDB(NewDynamoDB(t))(h); err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if err := o(h); err != nil {
			t.Fatalf("exactlytest: %v", err)
		}
	}
	return h
}

// Delivery is the result of delivering one message.
type Delivery struct {
	// Outcome is what the delivery came to, in the worker's terms
	// (exactly.Applied, Duplicate, Conflict, Busy, Retry, Failed).
	Outcome exactly.Outcome
	Key     string // the scoped dedup key
	Result  []byte // the effect's stored result (Applied, Duplicate)
	Err     error  // why (Conflict, Busy, Retry, Failed)
	// Ran is how many times the effect ran during this delivery: 0 or 1;
	// in optimistic mode 1 for a duplicate or a conflict too (its output
	// dropped), and 2 for an effect that failed (it runs again under a
	// claim before its failure is judged).
	Ran int
}

// Deliver runs one delivery of m: claim, effect, commit.
func (h *Harness) Deliver(m effect.Message) Delivery {
	before := h.runs.Load()
	if m.QueueName == "" {
		m.QueueName = "test.fifo"
	}
	if m.ReceiveCount == 0 {
		m.ReceiveCount = 1
	}
	r := h.proc.Process(context.Background(), m, process.Hooks{})
	d := Delivery{Key: r.Key, Result: r.Result, Err: r.Err, Ran: int(h.runs.Load() - before)}
	switch {
	case r.Outcome == dedup.Conflict:
		d.Outcome = exactly.Conflict
	case r.Action == process.Delete && r.Outcome == dedup.Duplicate:
		d.Outcome = exactly.Duplicate
	case r.Action == process.Delete:
		d.Outcome = exactly.Applied
	case r.Outcome == dedup.Busy:
		d.Outcome = exactly.Busy
	case r.Action == process.Retry:
		d.Outcome = exactly.Retry
	default:
		d.Outcome = exactly.Failed
	}
	return d
}

// Runs is how many times the effect has run so far.
func (h *Harness) Runs() int { return int(h.runs.Load()) }

func (h *Harness) require(m effect.Message, want exactly.Outcome) Delivery {
	h.t.Helper()
	d := h.Deliver(m)
	if d.Outcome != want {
		h.t.Fatalf("exactlytest: message %q: want %s, got %s (err: %v)", m.Body, want, d.Outcome, d.Err)
	}
	return d
}

// RequireApplied delivers m and fails the test unless its effect ran and
// committed.
func (h *Harness) RequireApplied(m effect.Message) Delivery {
	h.t.Helper()
	d := h.require(m, exactly.Applied)
	if d.Ran != 1 {
		h.t.Fatalf("exactlytest: message %q applied, but the effect ran %d times", m.Body, d.Ran)
	}
	return d
}

// RequireDuplicate delivers m and fails the test unless it was absorbed as
// a duplicate, without running the effect (in optimistic mode: without
// applying its output).
func (h *Harness) RequireDuplicate(m effect.Message) Delivery {
	h.t.Helper()
	return h.requireNotRun(m, exactly.Duplicate)
}

// RequireConflict delivers m and fails the test unless it was refused as a
// conflict (its key completed for another payload), without running the
// effect (in optimistic mode: without applying its output).
func (h *Harness) RequireConflict(m effect.Message) Delivery {
	h.t.Helper()
	return h.requireNotRun(m, exactly.Conflict)
}

func (h *Harness) requireNotRun(m effect.Message, want exactly.Outcome) Delivery {
	h.t.Helper()
	d := h.require(m, want)
	if d.Ran != 0 && !h.proc.Optimistic {
		h.t.Fatalf("exactlytest: message %q was a %s, but the effect ran", m.Body, want)
	}
	return d
}

// RequireRetry delivers m and fails the test unless it failed retryably.
func (h *Harness) RequireRetry(m effect.Message) Delivery {
	h.t.Helper()
	return h.require(m, exactly.Retry)
}

// RequireFailed delivers m and fails the test unless it failed
// permanently (the dead-letter queue's way).
func (h *Harness) RequireFailed(m effect.Message) Delivery {
	h.t.Helper()
	return h.require(m, exactly.Failed)
}

// Msg is a FIFO message with body, in group "g", whose dedup id is derived
// from the body (as content-based deduplication does); opts change it.
func Msg(body string, opts ...func(*effect.Message)) effect.Message {
	m := effect.Message{
		QueueName: "test.fifo", ID: fmt.Sprintf("m-%x", dedup.PayloadHash(body)[:12]), Body: body,
		Group: "g", DedupID: dedup.PayloadHash(body), ReceiveCount: 1, Attributes: map[string]string{},
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// Group sets a message's group.
func Group(g string) func(*effect.Message) { return func(m *effect.Message) { m.Group = g } }

// DedupID sets a message's MessageDeduplicationId.
func DedupID(id string) func(*effect.Message) { return func(m *effect.Message) { m.DedupID = id } }

// Key sets a message's idempotency-key attribute: the key the worker's
// default key source (auto) takes first, and the one the outbox relay
// sends.
func Key(k string) func(*effect.Message) { return Attr(dedup.IdempotencyKeyAttribute, k) }

// SendInput is the SendMessageInput that sends m to the queue at url, for
// SQS.SendMessage (this package's or the SDK's): its body, its attributes
// (Key, Attr) as String message attributes, and on a FIFO queue (a url
// ending in .fifo) its group and deduplication id. Msg's ID and
// ReceiveCount are SQS's to give, so they are not sent.
func SendInput(url string, m effect.Message) *sqs.SendMessageInput {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(m.Body)}
	if strings.HasSuffix(url, ".fifo") {
		if m.Group != "" {
			in.MessageGroupId = aws.String(m.Group)
		}
		if m.DedupID != "" {
			in.MessageDeduplicationId = aws.String(m.DedupID)
		}
	}
	for name, v := range m.Attributes {
		if in.MessageAttributes == nil {
			in.MessageAttributes = map[string]sqstypes.MessageAttributeValue{}
		}
		in.MessageAttributes[name] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return in
}

// Attr sets a message attribute, such as "idempotency-key".
func Attr(name, value string) func(*effect.Message) {
	return func(m *effect.Message) { m.Attributes[name] = value }
}
