package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// The Lambda worker's wiring (lambdaHandler, lambdaQueues) on the in-memory
// SQS and DynamoDB.

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

func memStore(t *testing.T) *dedup.Store {
	t.Helper()
	ctx := context.Background()
	db := memdynamo.New()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("dedup"),
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	return dedup.NewStore(db, "dedup")
}

// lambdaSettings parses args as the Lambda command does and reads the
// listed queues.
func lambdaSettings(t *testing.T, c lambdaSQS, args ...string) (settings, lambdaQueueSet) {
	t.Helper()
	var s settings
	fs := newLambdaSet(&s, func(string) (string, bool) { return "", false })
	fs.SetOutput(io.Discard)
	require.NoError(t, fs.Parse(append([]string{"--effect", "noop"}, args...)))
	require.NoError(t, s.validate(fs, true))
	queues, err := lambdaQueues(context.Background(), c, fs, s)
	require.NoError(t, err)
	return s, queues
}

func arnOf(t *testing.T, c *memsqs.Server, url string) string {
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
	s, queues := lambdaSettings(t, c, "--queue", url, "--move-to-dlq")
	h, err := lambdaHandler(s, c, memStore(t), &ranEffect{}, slog.New(slog.DiscardHandler), queues)
	require.NoError(t, err)

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
	s, queues := lambdaSettings(t, c, "--queue", url, "--move-to-dlq")
	h, err := lambdaHandler(s, c, memStore(t), &ranEffect{}, slog.New(slog.DiscardHandler), queues)
	require.NoError(t, err)

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
