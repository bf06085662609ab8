package exactly_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// The Lambda handler on the in-memory SQS and DynamoDB.

// ranEffect records the bodies it ran; "poison" fails permanently.
type ranEffect struct {
	mu  sync.Mutex
	ran []string
}

func (e *ranEffect) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	if in.Message.Body == "poison" {
		return effect.Output{}, effect.Permanent(errors.New("poison"))
	}
	e.mu.Lock()
	e.ran = append(e.ran, in.Message.Body)
	e.mu.Unlock()
	return effect.Output{}, nil
}

func (e *ranEffect) bodies() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.ran...)
}

// memTable is an in-memory DynamoDB with a dedup table "dedup" (TTL on).
func memTable(t *testing.T) *memdynamo.DB {
	t.Helper()
	db := memdynamo.New()
	newDedupTable(db)
	return db
}

// lambdaHandler is a Lambda handler on c and a fresh ledger; cfg gives the
// rest (queues, DLQ moves).
func lambdaHandler(t *testing.T, c exactly.SQS, eff effect.Effect, cfg exactly.Config) *exactly.LambdaHandler {
	t.Helper()
	cfg.SQS, cfg.DynamoDB, cfg.Table, cfg.Effect = c, memTable(t), "dedup", eff
	h, err := exactly.NewLambdaHandler(context.Background(), cfg)
	require.NoError(t, err)
	return h
}

func arnOf(t *testing.T, c exactly.SQS, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	require.NoError(t, err)
	return out.Attributes["QueueArn"]
}

// record is a FIFO record as Lambda delivers it.
func record(arn, id, group, dedupID, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSourceARN: arn, EventSource: "aws:sqs",
		Attributes: map[string]string{
			"MessageGroupId": group, "MessageDeduplicationId": dedupID, "ApproximateReceiveCount": "1",
			"SequenceNumber": "1000000000000000000" + strconv.Itoa(len(id)),
		},
	}
}

func handle(t *testing.T, h interface {
	Handle(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}, recs ...events.SQSMessage) []events.SQSBatchItemFailure {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, events.SQSEvent{Records: recs})
	require.NoError(t, err)
	return resp.BatchItemFailures
}

var highThroughput = map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}

// TestLambdaMoveToDLQGivesTheCopyItsOwnDedupID: the Lambda worker's move of
// two permanent failures of a high-throughput queue, same dedup id in two
// groups, to its plain FIFO dead-letter queue: both copies arrive. Reusing
// the source's dedup id, the DLQ dropped the second copy and the record was
// not reported: the event source mapping deleted it, a lost message.
func TestLambdaMoveToDLQGivesTheCopyItsOwnDedupID(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, dlq := memsqs.NewQueue(t, c, true, highThroughput, 5)
	arn := arnOf(t, c, url)
	h := lambdaHandler(t, c, &ranEffect{}, exactly.Config{Queues: []string{url}})

	failed := handle(t, h, record(arn, "m-a", "A", "same", "poison"), record(arn, "m-b", "B", "same", "poison"))
	require.Empty(t, failed, "both moved: not reported")
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &dlq, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	require.NoError(t, err)
	require.Len(t, out.Messages, 2, "both copies are in the dead-letter queue")
	groups := []string{}
	for _, m := range out.Messages {
		groups = append(groups, m.Attributes["MessageGroupId"])
		require.Equal(t, "same", aws.ToString(m.MessageAttributes[dedup.IdempotencyKeyAttribute].StringValue), "the dedup key is carried")
		require.Contains(t, aws.ToString(m.MessageAttributes["exactly-failure"].StringValue), "poison", "and why it failed")
	}
	require.ElementsMatch(t, []string{"A", "B"}, groups)
}

// TestLambdaDoesNotCopyWithoutRoomForTheKey: a record with ten message
// attributes and no idempotency-key is not copied to the DLQ (the copy
// would lose its dedup key); it is reported, for the redrive policy.
func TestLambdaDoesNotCopyWithoutRoomForTheKey(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, dlq := memsqs.NewQueue(t, c, true, nil, 5)
	arn := arnOf(t, c, url)
	h := lambdaHandler(t, c, &ranEffect{}, exactly.Config{Queues: []string{url}})

	rec := record(arn, "m-full", "A", "d-full", "poison")
	rec.MessageAttributes = map[string]events.SQSMessageAttribute{}
	for i := range 10 {
		rec.MessageAttributes["a"+strconv.Itoa(i)] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String("v")}
	}
	failed := handle(t, h, rec)
	require.Len(t, failed, 1, "reported: left to the redrive policy")
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	require.NoError(t, err)
	require.Equal(t, "0", out.Attributes["ApproximateNumberOfMessages"], "no lossy copy")
}

// TestLambdaKeysAnUnlistedQueueAsItDedups: a queue not listed whose
// DeduplicationScope is messageGroup takes the same dedup id in two groups
// as two messages; so must the ledger. Keyed with the default scope
// (queue), the second was a conflict (or busy) and was never applied.
func TestLambdaKeysAnUnlistedQueueAsItDedups(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, _ := memsqs.NewQueue(t, c, true, highThroughput, 0)
	arn := arnOf(t, c, url)
	eff := &ranEffect{}
	h := lambdaHandler(t, c, eff, exactly.Config{LeaveToRedrivePolicy: true}) // no queue listed
	failed := handle(t, h, record(arn, "m-a", "A", "same", "to A"), record(arn, "m-b", "B", "same", "to B"))
	require.Empty(t, failed)
	require.ElementsMatch(t, []string{"to A", "to B"}, eff.bodies(), "both applied")
}

// countingSQS counts the attribute reads and fails the next `fail` GetQueueUrl calls.
type countingSQS struct {
	exactly.SQS
	urls, attrs atomic.Int64
	fail        atomic.Int64
}

func (c *countingSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	c.urls.Add(1)
	if c.fail.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return c.SQS.GetQueueUrl(ctx, in, opts...)
}

func (c *countingSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	c.attrs.Add(1)
	return c.SQS.GetQueueAttributes(ctx, in, opts...)
}

// TestLambdaReadsAnUnlistedQueueOnce: an unlisted queue's attributes are
// read at its first event and kept; a failed read is not kept (its records
// are reported, to come back) and the next event reads again; a listed
// queue is never read again.
func TestLambdaReadsAnUnlistedQueueOnce(t *testing.T) {
	t.Parallel()
	mem := memsqs.New()
	listedURL, _ := memsqs.NewQueue(t, mem, true, nil, 0)
	url, _ := memsqs.NewQueue(t, mem, true, highThroughput, 0)
	arn, listedARN := arnOf(t, mem, url), arnOf(t, mem, listedURL)
	c := &countingSQS{SQS: mem}
	eff := &ranEffect{}
	h := lambdaHandler(t, c, eff, exactly.Config{Queues: []string{listedURL}, LeaveToRedrivePolicy: true})
	c.urls.Store(0)
	c.attrs.Store(0)

	c.fail.Store(1)
	failed := handle(t, h, record(arn, "m1", "A", "d1", "one"), record(arn, "m2", "A", "d2", "two"))
	require.Len(t, failed, 2, "the queue's scope unknown: nothing runs, everything comes back")
	require.Empty(t, eff.bodies())

	require.Empty(t, handle(t, h, record(arn, "m1", "A", "d1", "one"), record(arn, "m2", "A", "d2", "two")), "read again")
	require.Empty(t, handle(t, h, record(arn, "m3", "B", "d1", "three"), record(listedARN, "m4", "A", "d1", "four")))
	require.ElementsMatch(t, []string{"one", "two", "three", "four"}, eff.bodies())
	require.EqualValues(t, 2, c.urls.Load(), "one failed read, one that is kept")
	require.EqualValues(t, 1, c.attrs.Load(), "the listed queue was read at cold start only")

	// Concurrent first events of another queue share one read.
	other, _ := memsqs.NewQueue(t, mem, true, highThroughput, 0)
	otherARN := arnOf(t, mem, other)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			require.Empty(t, handle(t, h, record(otherARN, "o"+string(rune('a'+i)), "G"+string(rune('a'+i)), "same", "o")))
		})
	}
	wg.Wait()
	require.EqualValues(t, 2, c.attrs.Load())
}

// TestLambdaDedupScopeContradictingAQueue: a DedupScope that contradicts a
// listed queue is a ConfigError naming the setting.
func TestLambdaDedupScopeContradictingAQueue(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, _ := memsqs.NewQueue(t, c, true, highThroughput, 0)
	_, err := exactly.NewLambdaHandler(context.Background(), exactly.Config{
		SQS: c, DynamoDB: memTable(t), Table: "dedup", Effect: &ranEffect{}, Queues: []string{url},
		LeaveToRedrivePolicy: true, Lambda: exactly.LambdaConfig{DedupScope: "queue"},
	})
	var ce *exactly.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Lambda.DedupScope", ce.Setting)
	require.Contains(t, err.Error(), "contradicts queue")
}

// TestLambdaTestSeam: Config.Test reaches the ledger and the processor. The
// record's lease and expiry are reckoned from Test.Now (from time.Now
// without it), and its fencing token is drawn from Test.Rand: two handlers
// seeded alike draw the same token, two without a source do not.
func TestLambdaTestSeam(t *testing.T) {
	t.Parallel()
	run := func(test exactly.TestConfig) (expires int64, token string) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, highThroughput, 0)
		arn := arnOf(t, c, url)
		db := memTable(t)
		h, err := exactly.NewLambdaHandler(context.Background(), exactly.Config{SQS: c, DynamoDB: db, Table: "dedup", Effect: &ranEffect{}, LeaveToRedrivePolicy: true, Test: test})
		require.NoError(t, err)
		require.Empty(t, handle(t, h, record(arn, "m1", "A", "d1", "one")))
		key := dedup.Scope{Namespace: exactly.DefaultNamespace, Queue: sqsQueueName(url), PerGroup: true}.Key("A", "d1")
		out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String("dedup"), Key: map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}},
		})
		require.NoError(t, err)
		require.NotNil(t, out.Item, "the record of %s", key)
		exp, err := strconv.ParseInt(out.Item[dedup.AttrExpiresAt].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
		require.NoError(t, err)
		return exp, dedup.GetS(out.Item, dedup.AttrToken)
	}
	for _, skew := range []time.Duration{0, 100 * time.Hour} {
		var test exactly.TestConfig
		if skew != 0 {
			test.Now = func() time.Time { return time.Now().Add(skew) }
		}
		exp, _ := run(test)
		want := time.Now().Add(skew + exactly.DefaultTTL).Unix()
		require.InDelta(t, want, exp, 60, "expiry reckoned from the ledger's clock (skew %s)", skew)
	}
	_, a := run(exactly.TestConfig{Rand: rand.NewPCG(7, 1)})
	_, b := run(exactly.TestConfig{Rand: rand.NewPCG(7, 1)})
	_, c := run(exactly.TestConfig{})
	_, d := run(exactly.TestConfig{})
	require.NotEmpty(t, a)
	require.Equal(t, a, b, "tokens drawn from one seed")
	require.NotEqual(t, c, d, "tokens of the runtime's randomness")
	require.NotEqual(t, a, c)
}

func sqsQueueName(url string) string { return url[strings.LastIndexByte(url, '/')+1:] }
