package outbox_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

// dbAPI and sqsAPI are what the tests need of DynamoDB and SQS: the
// in-memory fakes and the emulators' clients both offer them.
type dbAPI interface {
	outbox.API
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

type sqsAPI interface {
	testenv.QueueAdmin
	outbox.SQS
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	SetQueueAttributes(context.Context, *sqs.SetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

// env is an outbox table and two FIFO queues.
type env struct {
	db     dbAPI
	sqs    sqsAPI
	table  string
	q1, q2 string
}

// each runs f against the in-memory fakes and against the local stack
// (DynamoDB Local and fauxqs; skipped without them unless
// EXACTLY_REQUIRE_INTEGRATION=1), so the fakes cannot pass what the
// emulators fail.
func each(t *testing.T, f func(t *testing.T, e *env)) {
	t.Run("memory", func(t *testing.T) {
		f(t, newEnv(t, memdynamo.New(), memsqs.New()))
	})
	t.Run("emulators", func(t *testing.T) {
		f(t, newEnv(t, testenv.DynamoDB(t), testenv.SQS(t)))
	})
}

func newEnv(t testing.TB, db dbAPI, q sqsAPI) *env {
	t.Helper()
	e := &env{db: db, sqs: q, table: testenv.Name("outbox")}
	_, err := db.CreateTable(context.Background(), outboxschema.CreateTableInput(e.table))
	require.NoError(t, err)
	if d, ok := db.(interface {
		DeleteTable(context.Context, *dynamodb.DeleteTableInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	}); ok {
		t.Cleanup(func() { _, _ = d.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &e.table}) })
	}
	e.q1, _ = testenv.NewQueue(t, q, true, nil, 0)
	e.q2, _ = testenv.NewQueue(t, q, true, nil, 0)
	return e
}

func (e *env) relay() *outbox.Relay {
	return &outbox.Relay{DB: e.db, SQS: e.sqs, Table: e.table}
}

// received drains a queue: per group, the bodies in delivery order, and the
// idempotency-key of each. It long-polls (1 s): a short poll may answer
// empty while messages wait, as SQS documents (and fauxqs did once, on a
// loaded machine, with 1.5 MB waiting).
func (e *env) received(t *testing.T, queue string) (bodies map[string][]string, keys map[string]string) {
	t.Helper()
	ctx := context.Background()
	bodies, keys = map[string][]string{}, map[string]string{}
	for {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			return bodies, keys
		}
		for _, m := range out.Messages {
			g := m.Attributes["MessageGroupId"]
			bodies[g] = append(bodies[g], aws.ToString(m.Body))
			keys[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["idempotency-key"].StringValue)
			if strings.HasSuffix(queue, ".fifo") {
				require.Equal(t, keys[aws.ToString(m.Body)], m.Attributes["MessageDeduplicationId"], "the dedup id is the idempotency-key")
			}
			_, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
}

// receivedAll is received until n messages came or two minutes passed: on a
// loaded machine an emulator's one-second poll can come back empty while a
// backlog of large messages is still there, and 20 MB of them took fauxqs
// more than 30 s on a fresh-clone CI run. The wait ends as soon as n came.
func (e *env) receivedAll(t *testing.T, queue string, n int) (bodies map[string][]string) {
	t.Helper()
	bodies = map[string][]string{}
	count := 0
	for deadline := time.Now().Add(2 * time.Minute); count < n && time.Now().Before(deadline); {
		more, _ := e.received(t, queue)
		for g, b := range more {
			bodies[g] = append(bodies[g], b...)
			count += len(b)
		}
	}
	return bodies
}

func msg(queue, group, body string) outbox.Message {
	return outbox.Message{QueueURL: queue, Group: group, Body: body, ID: "id-" + body}
}

func TestWriteAndSweepPublishInOrder(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		now := time.Unix(1_800_000_000, 0)
		ob := outbox.New(e.db, e.table, outbox.WithClock(func() time.Time { return now }))
		// Business data and two messages in one transaction; then more.
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "b", "b1")},
			ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &e.table, Item: map[string]ddbtypes.AttributeValue{
				"pk": &ddbtypes.AttributeValueMemberS{Value: "business"}, "sk": &ddbtypes.AttributeValueMemberN{Value: "1"}}}}))
		for i := 2; i <= 12; i++ {
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", fmt.Sprint("a", i))}))
		}
		require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: e.q2, Group: "c", Body: "c1", Attributes: map[string]string{"kind": "x"}}}))

		var rounds []outbox.Round
		r := e.relay()
		r.Clock = func() time.Time { return now.Add(5 * time.Second) }
		r.OnRound = func(x outbox.Round) { rounds = append(rounds, x) }
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, round.Groups)
		require.Equal(t, 12, round.Published, "ten of group a (PerGroup), b1, c1")
		require.Equal(t, 5*time.Second, round.Lag, "the oldest pending message's age, from the index")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published, "the rest of group a")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "nothing pending: every group left the index")
		require.Len(t, rounds, 3)

		bodies, _ := e.received(t, e.q1)
		var want []string
		for i := 1; i <= 12; i++ {
			want = append(want, fmt.Sprint("a", i))
		}
		require.Equal(t, want, bodies["a"])
		require.Equal(t, []string{"b1"}, bodies["b"])
		bodies, keys := e.received(t, e.q2)
		require.Equal(t, []string{"c1"}, bodies["c"])
		require.Regexp(t, "^c/[0-9a-f]{32}$", keys["c1"], "the group and a generated id")

		// Published messages are marked, with a TTL; the business item is there.
		out, err := e.db.Query(ctx, &dynamodb.QueryInput{TableName: &e.table, KeyConditionExpression: aws.String("pk = :pk AND sk > :z"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: e.q1 + "#a"}, ":z": &ddbtypes.AttributeValueMemberN{Value: "0"}}})
		require.NoError(t, err)
		require.Len(t, out.Items, 12)
		for _, it := range out.Items {
			require.Contains(t, it, outboxschema.AttrSentAt)
			require.Equal(t, &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(5*time.Second).Add(outbox.DefaultRetention).Unix(), 10)}, it[outboxschema.AttrTTL])
		}
		got, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "business"}, "sk": &ddbtypes.AttributeValueMemberN{Value: "1"}}})
		require.NoError(t, err)
		require.NotNil(t, got.Item)
	})
}

func TestWriteIsAllOrNothing(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		// The caller's write fails its condition: no message is written.
		err := ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1")}, ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
			TableName: &e.table, Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "nope"}, "sk": &ddbtypes.AttributeValueMemberN{Value: "1"}},
			ConditionExpression: aws.String("attribute_exists(pk)")}})
		var tce *ddbtypes.TransactionCanceledException
		require.ErrorAs(t, err, &tce)
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, round.Groups)

		for name, m := range map[string]outbox.Message{
			"no group on FIFO": {QueueURL: e.q1, Body: "x"},
			"empty body":       {QueueURL: e.q1, Group: "g"},
			"bad body":         {QueueURL: e.q1, Group: "g", Body: "\x00"},
			"too big":          {QueueURL: e.q1, Group: "g", Body: strings.Repeat("x", outbox.MaxBodyBytes+1)},
			"bad id":           {QueueURL: e.q1, Group: "g", Body: "x", ID: "has space"},
			"bad attribute":    {QueueURL: e.q1, Group: "g", Body: "x", Attributes: map[string]string{"AWS.x": "1"}},
			"own key":          {QueueURL: e.q1, Group: "g", Body: "x", Attributes: map[string]string{"idempotency-key": "1"}},
			"not a URL":        {QueueURL: "one.fifo", Group: "g", Body: "x"},
		} {
			require.ErrorIs(t, ob.Write(ctx, []outbox.Message{m}), outbox.ErrInvalid, name)
		}
	})
}

// Producers racing on one group: every message gets its own sequence
// number, and the relay publishes them in the order they committed.
func TestConcurrentProducersKeepCommitOrder(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		var wg sync.WaitGroup
		for p := 0; p < 4; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 15; i++ {
					assert.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "g", fmt.Sprintf("p%d-%02d", p, i))}))
				}
			}()
		}
		wg.Wait()
		r := e.relay()
		r.PerGroup = 50
		for {
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			if round.Groups == 0 {
				break
			}
		}
		bodies, _ := e.received(t, e.q1)
		require.Len(t, bodies["g"], 60)
		// Each producer's messages arrive in its own order (its writes were
		// sequential, so they committed in that order).
		last := map[string]string{}
		for _, b := range bodies["g"] {
			p := b[:2]
			require.Less(t, last[p], b, "producer %s out of order", p)
			last[p] = b
		}
	})
}

// faultySQS fails SendMessageBatch calls as told.
type faultySQS struct {
	sqsAPI
	mu sync.Mutex
	// lose: the call takes effect and returns an error anyway.
	lose int
	// failEntry: the entry with this body fails (retryably) while the
	// others go through.
	failEntry map[string]int
	// refuse: the entry with this body is refused for good, with
	// refuseCode (InvalidMessageContents when empty).
	refuse     string
	refuseCode string
}

func (f *faultySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keep []sqstypes.SendMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, en := range in.Entries {
		body := aws.ToString(en.MessageBody)
		switch {
		case f.failEntry[body] > 0:
			f.failEntry[body]--
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: en.Id, Code: aws.String("InternalError"), SenderFault: false})
		case body == f.refuse:
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: en.Id, Code: aws.String(cmp.Or(f.refuseCode, "InvalidMessageContents")), SenderFault: true, Message: aws.String("no")})
		default:
			keep = append(keep, en)
		}
	}
	out := &sqs.SendMessageBatchOutput{Failed: failed}
	if len(keep) > 0 {
		in2 := *in
		in2.Entries = keep
		o, err := f.sqsAPI.SendMessageBatch(ctx, &in2, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful = o.Successful
		out.Failed = append(out.Failed, o.Failed...)
	}
	if f.lose > 0 {
		f.lose--
		return nil, errors.New("connection reset after the request was sent")
	}
	return out, nil
}

func TestPublicationFaults(t *testing.T) {
	t.Run("lost response: published again, one message to SQS", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "a2")}))
			f := &faultySQS{sqsAPI: e.sqs, lose: 1}
			r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 0, round.Published, "the lost answer stops the group")
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published)
			bodies, _ := e.received(t, e.q1)
			require.Equal(t, []string{"a1", "a2"}, bodies["a"], "SQS dropped the resend of a1 (same dedup id)")
		})
	})
	t.Run("a failed entry holds its group back, not the others", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "a2"), msg(e.q1, "b", "b1"), msg(e.q1, "b", "b2")}))
			f := &faultySQS{sqsAPI: e.sqs, failEntry: map[string]int{"a1": 1}}
			r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published, "b1 and b2; a2 waits for a1")
			bodies, _ := e.received(t, e.q1)
			require.Equal(t, []string{"b1", "b2"}, bodies["b"])
			require.Empty(t, bodies["a"])
			_, err = r.Sweep(ctx)
			require.NoError(t, err)
			bodies, _ = e.received(t, e.q1)
			require.Equal(t, []string{"a1", "a2"}, bodies["a"])
		})
	})
	t.Run("a message refused for good is marked failed and passed", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "bad"), msg(e.q1, "a", "a3")}))
			f := &faultySQS{sqsAPI: e.sqs, refuse: "bad"}
			r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published)
			require.Equal(t, 1, round.Failed)
			bodies, _ := e.received(t, e.q1)
			require.Equal(t, []string{"a1", "a3"}, bodies["a"])
			items, err := outbox.ListGroup(ctx, e.db, e.table, e.q1, "a", 10)
			require.NoError(t, err)
			require.Len(t, items, 3)
			require.Equal(t, "id-bad", items[1].ID)
			require.Contains(t, items[1].Failed, "InvalidMessageContents")
			require.False(t, items[0].SentAt.IsZero())
			require.Empty(t, items[0].Failed)
		})
	})
}

// faultyDB loses the response of the relay's progress transactions, or
// hides an item from queries (a transaction still being applied).
type faultyDB struct {
	dbAPI
	loseCommits atomic.Int32
	hide        atomic.Value // string: "pk/sk" hidden from Query
	failShards  bool         // the pending index's shards other than "0" cannot be read
}

func (f *faultyDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := f.dbAPI.TransactWriteItems(ctx, in, opts...)
	if err == nil && f.loseCommits.Add(-1) >= 0 {
		return nil, errors.New("timeout after the transaction committed")
	}
	return out, err
}

func (f *faultyDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := f.dbAPI.BatchGetItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	hide, _ := f.hide.Load().(string)
	for table, items := range out.Responses {
		kept := items[:0]
		for _, it := range items {
			if it["pk"].(*ddbtypes.AttributeValueMemberS).Value+"/"+it["sk"].(*ddbtypes.AttributeValueMemberN).Value != hide {
				kept = append(kept, it)
			}
		}
		out.Responses[table] = kept
	}
	return out, nil
}

func (f *faultyDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if s, ok := in.ExpressionAttributeValues[":s"].(*ddbtypes.AttributeValueMemberS); ok && f.failShards && in.IndexName != nil && s.Value != "0" {
		return nil, errors.New("throttled")
	}
	out, err := f.dbAPI.Query(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	hide, _ := f.hide.Load().(string)
	kept := out.Items[:0]
	for _, it := range out.Items {
		k := it["pk"].(*ddbtypes.AttributeValueMemberS).Value + "/" + it["sk"].(*ddbtypes.AttributeValueMemberN).Value
		if k != hide {
			kept = append(kept, it)
		}
	}
	out.Items = kept
	return out, nil
}

func TestProgressFaults(t *testing.T) {
	t.Run("lost progress: published again, in order", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1")}))
			db := &faultyDB{dbAPI: e.db}
			db.loseCommits.Store(1)
			r := &outbox.Relay{DB: db, SQS: e.sqs, Table: e.table}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Errors)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a2")}))
			// The lost transaction did commit: a1 is marked, the next sweep
			// goes on with a2.
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Published)
			bodies, _ := e.received(t, e.q1)
			require.Equal(t, []string{"a1", "a2"}, bodies["a"])
		})
	})
	t.Run("a gap is not jumped", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "a2"), msg(e.q1, "a", "a3")}))
			db := &faultyDB{dbAPI: e.db}
			db.hide.Store(e.q1 + "#a/2")
			r := &outbox.Relay{DB: db, SQS: e.sqs, Table: e.table}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Published, "a1 only: a3 waits for a2 to show")
			db.hide.Store("")
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published)
			bodies, _ := e.received(t, e.q1)
			require.Equal(t, []string{"a1", "a2", "a3"}, bodies["a"])
		})
	})
	t.Run("two relays: every message, first copies in order", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ob := outbox.New(e.db, e.table)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var dups atomic.Int64
			for i := 0; i < 2; i++ {
				r := &outbox.Relay{DB: e.db, SQS: e.sqs, Table: e.table, PerGroup: 3, OnRound: func(x outbox.Round) { dups.Add(int64(x.Duplicates)) }}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, _ = r.Sweep(ctx)
					}
				}()
			}
			for i := 0; i < 40; i++ {
				require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, fmt.Sprint("g", i%3), fmt.Sprintf("m%02d", i))}))
			}
			require.Eventually(t, func() bool {
				round, err := (&outbox.Relay{DB: e.db, SQS: noSQS{}, Table: e.table}).Sweep(ctx)
				return err == nil && round.Groups == 0
			}, 10*time.Second, time.Millisecond)
			close(stop)
			wg.Wait()
			bodies, _ := e.received(t, e.q1)
			total := 0
			for g, bs := range bodies {
				total += len(bs)
				for i := 1; i < len(bs); i++ {
					require.Less(t, bs[i-1], bs[i], "group %s", g)
				}
			}
			require.Equal(t, 40, total, "SQS dropped the second copies (same dedup id)")
		})
	})
}

// noSQS publishes nothing: a relay with it only reads the index.
type noSQS struct{}

func (noSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("not publishing")
}

func TestDrainNamedGroups(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "b", "b1")}))
		r := e.relay()
		round, err := r.Drain(ctx, []string{e.q1 + "#a", e.q1 + "#a", e.q1 + "#nothing"})
		require.NoError(t, err)
		require.Equal(t, 2, round.Groups)
		require.Equal(t, 1, round.Published)
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, map[string][]string{"a": {"a1"}}, bodies)
		pending, err := outbox.ListPending(ctx, e.db, e.table, 10)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.Equal(t, "b1", pending[0].Body)
	})
}

func TestTheRelaysKeyIsTheWorkersFirstChoice(t *testing.T) {
	require.Equal(t, dedup.IdempotencyKeyAttribute, outbox.IdempotencyKeyAttribute)
}

// stoppingSQS cancels the relay's context at its first publication, as a
// SIGTERM in the middle of a round would.
type stoppingSQS struct {
	sqsAPI
	stop func()
}

func (s *stoppingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.stop()
	return s.sqsAPI.SendMessageBatch(ctx, in, opts...)
}

// TestRunFinishesTheRoundWhenStopped: a relay stopped in the middle of a
// round records what it published before it returns, so the next relay
// does not publish it again.
func TestRunFinishesTheRoundWhenStopped(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "a2"), msg(e.q1, "b", "b1")}))
		var rounds []outbox.Round
		r := &outbox.Relay{DB: e.db, SQS: &stoppingSQS{sqsAPI: e.sqs, stop: cancel}, Table: e.table, OnRound: func(x outbox.Round) { rounds = append(rounds, x) }}
		require.NoError(t, r.Run(ctx))
		require.Len(t, rounds, 1)
		require.Equal(t, 3, rounds[0].Published, "the round went on after the stop")
		pending, err := outbox.ListPending(context.Background(), e.db, e.table, 10)
		require.NoError(t, err)
		require.Empty(t, pending, "and recorded what it published")
	})
}

// TestSweepGoesOnWithoutAShard: the shards of the pending index it can
// read are published; the sweep says what it could not read.
func TestSweepGoesOnWithoutAShard(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		var msgs []outbox.Message
		for i := range 16 {
			msgs = append(msgs, msg(e.q1, fmt.Sprint("g", i), fmt.Sprint("m", i)))
		}
		require.NoError(t, ob.Write(ctx, msgs))
		db := &faultyDB{dbAPI: e.db, failShards: true}
		first, err := (&outbox.Relay{DB: db, SQS: e.sqs, Table: e.table}).Sweep(ctx)
		require.ErrorContains(t, err, "throttled")
		require.Positive(t, first.Published, "shard 0's groups")
		require.Less(t, first.Published, 16)
		rest, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 16-first.Published, rest.Published, "the rest next time")
	})
}

// staleDB shows the pending index's heads with their mark at 0 (an index
// copy that is behind) and the first message of each group unmarked in
// BatchGetItem reads (a read that met the marking transaction).
type staleDB struct {
	dbAPI
	on atomic.Bool
}

func (s *staleDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := s.dbAPI.Query(ctx, in, opts...)
	if err == nil && s.on.Load() && in.IndexName != nil {
		for _, it := range out.Items {
			delete(it, outboxschema.AttrSent)
		}
	}
	return out, err
}

func (s *staleDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := s.dbAPI.BatchGetItem(ctx, in, opts...)
	if err == nil && s.on.Load() {
		for _, items := range out.Responses {
			for _, it := range items {
				if it[outboxschema.AttrSK].(*ddbtypes.AttributeValueMemberN).Value == "1" {
					delete(it, outboxschema.AttrSentAt)
				}
			}
		}
	}
	return out, err
}

// TestAMarkAfterAnUnmarkedMessageIsNotTaken: a read showing message 1
// unmarked and 2 and 3 marked must not move the mark to 3 while taking 1:
// the mark then went past a message never published (found by the chain
// simulation's stale reads, seen once in chaos).
func TestAMarkAfterAnUnmarkedMessageIsNotTaken(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "a", "a2"), msg(e.q1, "a", "a3")}))
		_, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a4"), msg(e.q1, "a", "a5"), msg(e.q1, "a", "a6"), msg(e.q1, "a", "a7")}))
		db := &staleDB{dbAPI: e.db}
		db.on.Store(true)
		r := &outbox.Relay{DB: db, SQS: e.sqs, Table: e.table, PerGroup: 2}
		_, err = r.Sweep(ctx)
		require.NoError(t, err)
		db.on.Store(false)
		for range 4 {
			_, err = r.Sweep(ctx)
			require.NoError(t, err)
		}
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"}, bodies["a"], "SQS dropped the repeat of a1; none skipped")
		items, err := outbox.ListGroup(ctx, e.db, e.table, e.q1, "a", 10)
		require.NoError(t, err)
		for _, it := range items {
			require.False(t, it.SentAt.IsZero(), "message %d published and marked", it.Seq)
		}
	})
}
