package exactlytest_test

import (
	"context"
	"fmt"
	"testing"

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
