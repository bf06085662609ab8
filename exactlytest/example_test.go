package exactlytest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
)

// An effect's test: a redelivery and a producer's retry are absorbed, and
// the same order with another amount is a conflict, all without AWS.
func ExampleHarness() {
	t := &testing.T{} // in a test, the test's own t
	charges := 0
	charge := effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
		charges++
		return effect.Output{}, nil
	})
	h := exactlytest.New(t, charge, exactlytest.KeySource("json:/order"))
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":5}`)).Outcome)
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":5}`)).Outcome)
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":9}`)).Outcome)
	fmt.Println("charges:", charges)
	// Output:
	// applied
	// duplicate
	// conflict
	// charges: 1
}

// A message with its idempotency-key attribute on the in-memory queue, as a
// producer sends it: SendInput builds the SendMessageInput (body, group,
// deduplication id, attributes) from Msg and its options.
func ExampleSendInput() {
	t := &testing.T{} // in a test, the test's own t
	ctx := context.Background()
	q := exactlytest.NewSQS()
	url, _ := exactlytest.NewQueue(t, q, "payments.fifo", 0)
	msg := exactlytest.Msg(`{"amount":5}`, exactlytest.Key("pay-o-1"), exactlytest.Group("customer-42"))
	if _, err := q.SendMessage(ctx, exactlytest.SendInput(url, msg)); err != nil {
		fmt.Println(err)
		return
	}
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &url, MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := out.Messages[0]
	fmt.Println(*m.Body, *m.MessageAttributes["idempotency-key"].StringValue, m.Attributes["MessageGroupId"])
	// Output: {"amount":5} pay-o-1 customer-42
}

// Fan-out without AWS: a FIFO topic with two FIFO queues subscribed (one
// raw, one with SNS's envelope), one publication, and each queue's copy
// with the group it was published in. outbox.Relay.SNS takes the same SNS.
func ExampleNewSNS() {
	t := &testing.T{} // in a test, the test's own t
	ctx := context.Background()
	q := exactlytest.NewSQS()
	s := exactlytest.NewSNS(q)
	topic := exactlytest.NewTopic(t, s, "orders.fifo")
	billing, _ := exactlytest.NewQueue(t, q, "billing.fifo", 0)
	audit, _ := exactlytest.NewQueue(t, q, "audit.fifo", 0)
	exactlytest.SubscribeQueue(t, s, q, topic, billing, true)
	exactlytest.SubscribeQueue(t, s, q, topic, audit, false)
	if _, err := s.Publish(ctx, &sns.PublishInput{
		TopicArn: &topic, Message: aws.String(`{"order":"o-1"}`),
		MessageGroupId: aws.String("customer-42"), MessageDeduplicationId: aws.String("o-1"),
	}); err != nil {
		fmt.Println(err)
		return
	}
	for _, url := range []string{billing, audit} {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		m := out.Messages[0]
		body := *m.Body
		if strings.Contains(body, `"Type":"Notification"`) {
			body = "an envelope"
		}
		fmt.Println(body, m.Attributes["MessageGroupId"])
	}
	fmt.Println("undelivered:", s.Undelivered())
	// Output:
	// {"order":"o-1"} customer-42
	// an envelope customer-42
	// undelivered: 0
}
