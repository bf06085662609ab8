package exactlytest

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/memsns"
)

// SNS is an in-memory SNS that delivers to the queues of an in-memory SQS:
// standard and FIFO topics, SQS subscriptions with raw message delivery
// and filter policies on message attributes, SNS's envelope otherwise, a
// FIFO topic's deduplication (by id or by content, five minutes) and its
// sequence numbers, and SNS's documented limits (message size, batch
// size, attributes, names). It has the methods of *sns.Client that
// outbox.Relay (Relay.SNS) and a test's own publisher call, with the same
// inputs and outputs. The project's own tests hold it to the SNS emulator
// by a shared contract suite. Make one with NewSNS, its topics with
// NewTopic and their subscriptions with SubscribeQueue. It is safe for
// concurrent use.
//
// A delivery whose SendMessage fails (a queue deleted meanwhile) is counted
// in Undelivered and not retried; SNS would retry an SQS endpoint for days.
type SNS struct {
	s *memsns.Server
}

// NewSNS returns an in-memory SNS with no topics, delivering to q's queues.
func NewSNS(q *SQS) *SNS { return &SNS{s: memsns.New(q.s)} }

// Undelivered is how many deliveries to a queue failed since s was made.
func (s *SNS) Undelivered() int { return s.s.Undelivered() }

// CreateTopic creates a topic (FIFO when its name ends in .fifo and
// FifoTopic is "true"), or returns the ARN of an existing one with the same
// attributes.
func (s *SNS) CreateTopic(ctx context.Context, in *sns.CreateTopicInput, optFns ...func(*sns.Options)) (*sns.CreateTopicOutput, error) {
	return s.s.CreateTopic(ctx, in, optFns...)
}

// DeleteTopic deletes a topic and its subscriptions.
func (s *SNS) DeleteTopic(ctx context.Context, in *sns.DeleteTopicInput, optFns ...func(*sns.Options)) (*sns.DeleteTopicOutput, error) {
	return s.s.DeleteTopic(ctx, in, optFns...)
}

// GetTopicAttributes returns a topic's attributes.
func (s *SNS) GetTopicAttributes(ctx context.Context, in *sns.GetTopicAttributesInput, optFns ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error) {
	return s.s.GetTopicAttributes(ctx, in, optFns...)
}

// SetTopicAttributes changes a settable attribute of a topic.
func (s *SNS) SetTopicAttributes(ctx context.Context, in *sns.SetTopicAttributesInput, optFns ...func(*sns.Options)) (*sns.SetTopicAttributesOutput, error) {
	return s.s.SetTopicAttributes(ctx, in, optFns...)
}

// Subscribe subscribes an SQS queue (protocol "sqs", its ARN as the
// endpoint) to a topic; a FIFO topic takes FIFO queues only.
func (s *SNS) Subscribe(ctx context.Context, in *sns.SubscribeInput, optFns ...func(*sns.Options)) (*sns.SubscribeOutput, error) {
	return s.s.Subscribe(ctx, in, optFns...)
}

// Unsubscribe deletes a subscription.
func (s *SNS) Unsubscribe(ctx context.Context, in *sns.UnsubscribeInput, optFns ...func(*sns.Options)) (*sns.UnsubscribeOutput, error) {
	return s.s.Unsubscribe(ctx, in, optFns...)
}

// GetSubscriptionAttributes returns a subscription's attributes.
func (s *SNS) GetSubscriptionAttributes(ctx context.Context, in *sns.GetSubscriptionAttributesInput, optFns ...func(*sns.Options)) (*sns.GetSubscriptionAttributesOutput, error) {
	return s.s.GetSubscriptionAttributes(ctx, in, optFns...)
}

// SetSubscriptionAttributes changes RawMessageDelivery or FilterPolicy.
func (s *SNS) SetSubscriptionAttributes(ctx context.Context, in *sns.SetSubscriptionAttributesInput, optFns ...func(*sns.Options)) (*sns.SetSubscriptionAttributesOutput, error) {
	return s.s.SetSubscriptionAttributes(ctx, in, optFns...)
}

// ListSubscriptionsByTopic lists a topic's subscriptions.
func (s *SNS) ListSubscriptionsByTopic(ctx context.Context, in *sns.ListSubscriptionsByTopicInput, optFns ...func(*sns.Options)) (*sns.ListSubscriptionsByTopicOutput, error) {
	return s.s.ListSubscriptionsByTopic(ctx, in, optFns...)
}

// Publish publishes one message to every subscription whose filter it
// passes, before it returns.
func (s *SNS) Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return s.s.Publish(ctx, in, optFns...)
}

// PublishBatch publishes up to 10 messages; invalid entries fail one by one.
func (s *SNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	return s.s.PublishBatch(ctx, in, optFns...)
}

// NewTopic creates a topic on s (FIFO, without content-based
// deduplication, when name ends in .fifo) and returns its ARN.
func NewTopic(t testing.TB, s *SNS, name string) string {
	t.Helper()
	in := &sns.CreateTopicInput{Name: &name}
	if strings.HasSuffix(name, ".fifo") {
		in.Attributes = map[string]string{"FifoTopic": "true"}
	}
	out, err := s.CreateTopic(context.Background(), in)
	if err != nil {
		t.Fatalf("exactlytest: create topic %s: %v", name, err)
	}
	return aws.ToString(out.TopicArn)
}

// SubscribeQueue subscribes the queue at queueURL of q to topicARN, with
// raw message delivery when raw (the queue's messages are then the
// published bodies, not SNS's envelope), and returns the subscription's
// ARN. The queue's kind must match the topic's.
func SubscribeQueue(t testing.TB, s *SNS, q *SQS, topicARN, queueURL string, raw bool) string {
	t.Helper()
	ctx := context.Background()
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("exactlytest: %v", err)
	}
	in := &sns.SubscribeInput{TopicArn: &topicARN, Protocol: aws.String("sqs"), Endpoint: aws.String(a.Attributes["QueueArn"]), ReturnSubscriptionArn: true}
	if raw {
		in.Attributes = map[string]string{"RawMessageDelivery": "true"}
	}
	out, err := s.Subscribe(ctx, in)
	if err != nil {
		t.Fatalf("exactlytest: subscribe %s to %s: %v", queueURL, topicARN, err)
	}
	return aws.ToString(out.SubscriptionArn)
}
