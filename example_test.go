package exactly_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
)

// Example runs a Worker on the in-memory SQS and DynamoDB of the test kit
// (package exactlytest); in production pass sqs.NewFromConfig(cfg) and
// dynamodb.NewFromConfig(cfg).
// One order sent three times is charged once.
func Example() {
	queue, url, db := inMemory()

	charged := 0
	w, err := exactly.New(context.Background(), exactly.Config{
		SQS: queue, DynamoDB: db, Table: "dedup", Queues: []string{url},
		KeySource: "json:/order",
		Effect: effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			charged++ // one group, so one effect at a time
			return effect.Output{}, nil
		}),
		WaitTime: time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, body := range []string{`{"order":"o-1"}`, `{"order":"o-1"}`, `{"order":"o-1"}`} {
		id := fmt.Sprint(i) // three sends, three dedup ids: SQS delivers all three
		_, _ = queue.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: &url, MessageBody: &body, MessageGroupId: &body, MessageDeduplicationId: &id,
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = w.Run(ctx)
	st := w.Stats()
	fmt.Println("charged", charged, "applied", st.Applied, "duplicates", st.Duplicates)
	// Output: charged 1 applied 1 duplicates 2
}

// inMemory is an in-memory SQS with a FIFO queue, and an in-memory DynamoDB
// with a dedup table.
func inMemory() (*exactlytest.SQS, string, *exactlytest.DynamoDB) {
	queue := exactlytest.NewSQS()
	q, err := queue.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String("orders.fifo"), Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"},
	})
	if err != nil {
		panic(err)
	}
	db := exactlytest.NewEmptyDynamoDB()
	newDedupTable(db)
	return queue, aws.ToString(q.QueueUrl), db
}

// newDedupTable creates the dedup table "dedup" on db: partition key pk (a
// string), TTL on expires_at.
func newDedupTable(db interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}) {
	if _, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("dedup"),
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		panic(err)
	}
	if _, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("dedup"),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	}); err != nil {
		panic(err)
	}
}

// ExampleNewLambdaHandler: the Lambda function's main, on the same Config as
// a Worker. The event source mapping needs ReportBatchItemFailures.
func ExampleNewLambdaHandler() {
	queue, url, db := inMemory()
	h, err := exactly.NewLambdaHandler(context.Background(), exactly.Config{
		SQS: queue, DynamoDB: db, Table: "dedup", Queues: []string{url},
		Effect: effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			return effect.Output{}, nil
		}),
		LeaveToRedrivePolicy: true,
		Lambda:               exactly.LambdaConfig{FailRest: "group"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In main: lambda.Start(h.Handle). Here, one event with a message twice.
	rec := events.SQSMessage{MessageId: "m1", Body: "hello", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:orders.fifo",
		Attributes: map[string]string{"MessageGroupId": "g", "MessageDeduplicationId": "d1", "ApproximateReceiveCount": "1"}}
	again := rec
	again.MessageId = "m2"
	resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec, again}})
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output: failures: 0
}
