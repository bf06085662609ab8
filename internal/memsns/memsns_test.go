package memsns_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

type bundle struct {
	clock *memsqs.ManualClock
	sqs   *memsqs.Server
	sns   *memsns.Server
	topic string
	queue string
}

func setup(t *testing.T, raw bool) *bundle {
	t.Helper()
	ctx := context.Background()
	b := &bundle{clock: memsqs.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	b.sqs = memsqs.New(memsqs.WithClock(b.clock))
	b.sns = memsns.New(b.sqs, memsns.WithClock(b.clock))
	out, err := b.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t.fifo"), Attributes: map[string]string{"FifoTopic": "true"}})
	require.NoError(t, err)
	b.topic = *out.TopicArn
	b.queue, _ = memsqs.NewQueue(t, b.sqs, true, nil, 0)
	a, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &b.queue, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	require.NoError(t, err)
	_, err = b.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: &b.topic, Protocol: aws.String("sqs"), Endpoint: aws.String(a.Attributes["QueueArn"]),
		Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(raw)}})
	require.NoError(t, err)
	return b
}

func (b *bundle) publish(t *testing.T, msg, dedup string) *sns.PublishOutput {
	t.Helper()
	out, err := b.sns.Publish(context.Background(), &sns.PublishInput{TopicArn: &b.topic, Message: &msg,
		MessageGroupId: aws.String("g"), MessageDeduplicationId: &dedup})
	require.NoError(t, err)
	return out
}

func (b *bundle) drain(t *testing.T) []string {
	t.Helper()
	var got []string
	for {
		out, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &b.queue, MaxNumberOfMessages: 10})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			got = append(got, *m.Body)
			_, err := b.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &b.queue, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
}

// A producer retry past the topic's five minutes is a new publication to
// SNS, and SQS's own window (the dedup id is carried) has passed too: the
// queue gets the second copy. Only the worker's ledger can drop it.
func TestDedupWindowEndsAfterFiveMinutes(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	first := b.publish(t, "one", "same")
	b.clock.Advance(memsns.DedupWindow - time.Second)
	again := b.publish(t, "one", "same")
	require.Equal(t, *first.MessageId, *again.MessageId, "inside the window: the first publication's id")
	require.Equal(t, *first.SequenceNumber, *again.SequenceNumber)
	require.Equal(t, []string{"one"}, b.drain(t))
	b.clock.Advance(time.Second)
	late := b.publish(t, "one", "same")
	require.NotEqual(t, *first.MessageId, *late.MessageId, "past the window: a new publication")
	require.Equal(t, []string{"one"}, b.drain(t), "and SQS, whose window passed too, takes it")
}

type failingSQS struct {
	memsns.SQS
	fail bool
}

func (f *failingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if f.fail {
		return nil, errors.New("injected")
	}
	return f.SQS.SendMessage(ctx, in, o...)
}

func TestFailedDeliveryIsCounted(t *testing.T) {
	t.Parallel()
	q := memsqs.New()
	f := &failingSQS{SQS: q, fail: true}
	s := memsns.New(f)
	ctx := context.Background()
	top, err := s.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("t")})
	require.NoError(t, err)
	url, _ := memsqs.NewQueue(t, q, false, nil, 0)
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	require.NoError(t, err)
	_, err = s.Subscribe(ctx, &sns.SubscribeInput{TopicArn: top.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(a.Attributes["QueueArn"])})
	require.NoError(t, err)
	_, err = s.Publish(ctx, &sns.PublishInput{TopicArn: top.TopicArn, Message: aws.String("x")})
	require.NoError(t, err, "SNS accepted it; the delivery failed")
	require.Equal(t, 1, s.Undelivered())
	f.fail = false
	_, err = s.Publish(ctx, &sns.PublishInput{TopicArn: top.TopicArn, Message: aws.String("y")})
	require.NoError(t, err)
	require.Equal(t, 1, s.Undelivered())
}

func TestFilterPolicyOutsideTheSubsetIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	for _, p := range []string{`{"n":[{"numeric":[">",1]}]}`, `{"kind":[]}`, `[]`, `{"kind":[{"prefix":""}]}`} {
		_, err := b.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: &b.topic, Protocol: aws.String("sqs"),
			Endpoint: aws.String("arn:aws:sqs:us-east-1:000000000000:other.fifo"), Attributes: map[string]string{"FilterPolicy": p}})
		var ip *snstypes.InvalidParameterException
		require.ErrorAs(t, err, &ip, "policy %s", p)
	}
}

func TestFilterPolicyExistsAnythingButNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	subs, err := b.sns.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: &b.topic})
	require.NoError(t, err)
	_, err = b.sns.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{SubscriptionArn: subs.Subscriptions[0].SubscriptionArn,
		AttributeName: aws.String("FilterPolicy"), AttributeValue: aws.String(`{"kind":[{"anything-but":["skip"]}],"n":[5],"tag":[{"exists":false}]}`)})
	require.NoError(t, err)
	str := func(v string) snstypes.MessageAttributeValue {
		return snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	num := func(v string) snstypes.MessageAttributeValue {
		return snstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(v)}
	}
	for i, c := range []struct {
		msg   string
		attrs map[string]snstypes.MessageAttributeValue
	}{
		{"match", map[string]snstypes.MessageAttributeValue{"kind": str("a"), "n": num("5.0")}},
		{"skipped", map[string]snstypes.MessageAttributeValue{"kind": str("skip"), "n": num("5")}},
		{"n as string", map[string]snstypes.MessageAttributeValue{"kind": str("a"), "n": str("5")}},
		{"tagged", map[string]snstypes.MessageAttributeValue{"kind": str("a"), "n": num("5"), "tag": str("x")}},
		{"no kind", map[string]snstypes.MessageAttributeValue{"n": num("5")}},
	} {
		_, err := b.sns.Publish(ctx, &sns.PublishInput{TopicArn: &b.topic, Message: aws.String(c.msg), MessageAttributes: c.attrs,
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(string(rune('a' + i)))})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"match"}, b.drain(t))
}
