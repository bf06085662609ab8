package outbox_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/outbox"
)

// newTables makes an in-memory DynamoDB with the outbox table "outbox" and
// a table "orders" of the producer's own; in production the client is
// dynamodb.NewFromConfig(cfg) and the tables come from Terraform.
func newTables() *exactlytest.DynamoDB {
	ctx := context.Background()
	db := exactlytest.NewEmptyDynamoDB()
	if _, err := db.CreateTable(ctx, outbox.CreateTableInput("outbox")); err != nil {
		panic(err)
	}
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("orders"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		panic(err)
	}
	return db
}

// createOrder is the producer's own write: an order that must not exist yet.
func createOrder(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:           aws.String("orders"),
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
}

// An order and the message that announces it commit in one transaction:
// both or neither. The message waits in the outbox for the relay.
func ExampleOutbox_Write() {
	ctx := context.Background()
	db := newTables()
	ob := outbox.New(db, "outbox")

	err := ob.Write(ctx, []outbox.Message{{
		QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
		Group:    "customer-42",
		ID:       "order-1001/created", // from the business key: a retried Write is a duplicate downstream
		Body:     `{"order":"1001"}`,
	}}, createOrder("order-1001"))
	if err != nil {
		fmt.Println(err)
		return
	}

	pending, err := outbox.ListPending(ctx, db, "outbox", 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range pending {
		fmt.Println(it.Group, it.Seq, it.ID, it.Body)
	}
	// Output: customer-42 1 order-1001/created {"order":"1001"}
}

// A Write whose own condition fails writes nothing: not the order, not its
// message. The error says which of the caller's writes refused.
func ExampleOutbox_Write_conditionFailed() {
	ctx := context.Background()
	db := newTables()
	ob := outbox.New(db, "outbox")
	msg := outbox.Message{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
		Group: "customer-42", ID: "order-1001/created", Body: `{"order":"1001"}`}

	fmt.Println("first:", ob.Write(ctx, []outbox.Message{msg}, createOrder("order-1001")) == nil)
	err := ob.Write(ctx, []outbox.Message{msg}, createOrder("order-1001"))
	fmt.Println("again refused:", err != nil)

	items, _ := outbox.ListGroup(ctx, db, "outbox", msg.QueueURL, msg.Group, 10)
	fmt.Println("messages:", len(items))
	// Output:
	// first: true
	// again refused: true
	// messages: 1
}

// The relay publishes a group's messages in the order their transactions
// committed, each under the key the consumer deduplicates by.
func ExampleRelay_Sweep() {
	ctx := context.Background()
	db := newTables()
	q := exactlytest.NewSQS()
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("orders.fifo"), Attributes: map[string]string{"FifoQueue": "true"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	url := aws.ToString(created.QueueUrl)

	ob := outbox.New(db, "outbox")
	for _, step := range []string{"created", "paid", "shipped"} {
		if err := ob.Write(ctx, []outbox.Message{{QueueURL: url, Group: "order-1001", ID: step, Body: step}}); err != nil {
			fmt.Println(err)
			return
		}
	}

	relay := &outbox.Relay{DB: db, SQS: q, Table: "outbox"}
	round, err := relay.Sweep(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("published:", round.Published)

	for {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, MessageAttributeNames: []string{outbox.IdempotencyKeyAttribute},
		})
		if err != nil || len(out.Messages) == 0 {
			break
		}
		var done []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			fmt.Println(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[outbox.IdempotencyKeyAttribute].StringValue))
			done = append(done, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: done}); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// published: 3
	// created order-1001/created
	// paid order-1001/paid
	// shipped order-1001/shipped
}
