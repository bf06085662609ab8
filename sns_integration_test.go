package exactly_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestFanOutOnTheLocalStack: a FIFO topic of fauxqs's SNS with two FIFO
// queues subscribed (raw delivery off and on), a worker on each against
// DynamoDB Local: each publication applied once per queue, in order, with
// a producer retry under a new deduplication id dropped by the ledger.
func TestFanOutOnTheLocalStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, sn, db := testenv.SQS(t), testenv.SNS(t), testenv.DynamoDB(t)
	name := testenv.Name("fan") + ".fifo"
	top, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: &name, Attributes: map[string]string{"FifoTopic": "true"}})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: top.TopicArn}) })
	effects := map[bool]*seen{false: {}, true: {}}
	done := make(chan error, 2)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var workers []*exactly.Worker
	for _, raw := range []bool{false, true} {
		url, _ := testenv.NewQueue(t, sq, true, nil, 5)
		arn := arnOf(t, sq, url)
		_, err := sn.Subscribe(ctx, &sns.SubscribeInput{TopicArn: top.TopicArn, Protocol: aws.String("sqs"), Endpoint: &arn,
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(raw)}})
		require.NoError(t, err)
		w, err := exactly.New(ctx, exactly.Config{SQS: sq, DynamoDB: db, Table: testenv.NewTable(t, db, true), Queues: []string{url},
			Effect: effects[raw], WaitTime: time.Second, Subscriptions: []exactly.Subscription{{Queue: url, Topic: *top.TopicArn, Raw: raw}}})
		require.NoError(t, err)
		workers = append(workers, w)
		go func() { done <- w.Run(runCtx) }()
	}
	publish := func(body, dedupID, key string) {
		_, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: top.TopicArn, Message: &body, MessageGroupId: aws.String("g"),
			MessageDeduplicationId: &dedupID, MessageAttributes: map[string]snstypes.MessageAttributeValue{
				"idempotency-key": {DataType: aws.String("String"), StringValue: &key}}})
		require.NoError(t, err)
	}
	var want []string
	for i := range 5 {
		publish(fmt.Sprintf("m%d", i), fmt.Sprintf("d%d", i), fmt.Sprintf("k%d", i))
		want = append(want, fmt.Sprintf("m%d", i))
	}
	publish("m1", "retry", "k1") // a producer retry under a new dedup id: both queues get it
	testenv.Eventually(t, 30*time.Second, func() bool {
		return workers[0].Stats().Duplicates == 1 && workers[1].Stats().Duplicates == 1
	}, "the retry seen as a duplicate on both queues")
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	for raw, eff := range effects {
		require.Equal(t, want, eff.bodies(), "raw=%v: each once, in order", raw)
	}
	require.Equal(t, *top.TopicArn, effects[false].ins[0].Message.Notification.TopicARN)
	require.NotEmpty(t, effects[false].ins[0].Message.Notification.MessageID)
}
