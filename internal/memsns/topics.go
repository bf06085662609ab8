package memsns

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
)

// ---------------------------------------------------------------- errors

func opErr(op string, err error) error {
	return &smithy.OperationError{ServiceID: "SNS", OperationName: op, Err: err}
}

func invalidParam(format string, args ...any) error {
	return &types.InvalidParameterException{Message: aws.String("Invalid parameter: " + fmt.Sprintf(format, args...))}
}

func notFound(what string) error {
	return &types.NotFoundException{Message: aws.String(what + " does not exist")}
}

// enter starts an operation: it fails if ctx is done, else locks the server;
// on success the caller unlocks s.mu.
func (s *Server) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return opErr(op, err)
	}
	s.mu.Lock()
	return nil
}

// enterTopic enters op (as enter) and finds the topic arn names; the lock
// is held only when it returns the topic.
func (s *Server) enterTopic(ctx context.Context, op string, arn *string) (*topic, error) {
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	t, err := s.topicOf(arn)
	if err != nil {
		s.mu.Unlock()
		return nil, opErr(op, err)
	}
	return t, nil
}

func (s *Server) topicOf(arn *string) (*topic, error) {
	if aws.ToString(arn) == "" {
		return nil, invalidParam("TopicArn is required")
	}
	t := s.topics[*arn]
	if t == nil {
		return nil, notFound("Topic")
	}
	return t, nil
}

// ---------------------------------------------------------------- topics

var topicSettable = map[string]bool{
	"FifoTopic": true, "ContentBasedDeduplication": true, "MaximumMessageSize": true, "DisplayName": true,
	"Policy": true, "DeliveryPolicy": true, "KmsMasterKeyId": true, "SignatureVersion": true, "TracingConfig": true,
	"ArchivePolicy": true, "FifoThroughputScope": true,
}

// apply validates attrs and sets them on t. creating: FifoTopic may be set.
func (t *topic) apply(attrs map[string]string, creating bool) error {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		if !topicSettable[k] {
			return invalidParam("Attribute Name: unknown attribute %s", k)
		}
		switch k {
		case "FifoTopic":
			fifo, err := boolAttr(k, v)
			if err != nil {
				return err
			}
			if !creating && fifo != t.fifo {
				return invalidParam("Attribute Name: FifoTopic cannot be changed")
			}
			t.fifo = fifo
		case "ContentBasedDeduplication":
			cbd, err := boolAttr(k, v)
			if err != nil {
				return err
			}
			t.contentDedup = cbd
		case "MaximumMessageSize":
			n, err := intAttr(k, v, 1024, MaxMessageSizeLimit)
			if err != nil {
				return err
			}
			t.maxSize = n
		default:
			t.attrs[k] = v
		}
	}
	if t.contentDedup && !t.fifo {
		return invalidParam("Attribute Name: ContentBasedDeduplication applies to FIFO topics only")
	}
	return nil
}

// CreateTopic creates a topic, or returns the ARN of the one of that name
// when its attributes agree. A FIFO topic's name ends in .fifo and needs
// FifoTopic=true.
func (s *Server) CreateTopic(ctx context.Context, in *sns.CreateTopicInput, _ ...func(*sns.Options)) (*sns.CreateTopicOutput, error) {
	const op = "CreateTopic"
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	name := aws.ToString(in.Name)
	if !validTopicName(name) {
		return nil, opErr(op, invalidParam("Topic Name: 1 to 256 of A-Z a-z 0-9 _ -, and .fifo at the end of a FIFO topic's name"))
	}
	t := &topic{arn: "arn:aws:sns:" + s.region + ":" + s.account + ":" + name, name: name,
		maxSize: DefaultMaxMessageSize, attrs: map[string]string{}, dedup: map[string]dedupEntry{}}
	if err := t.apply(in.Attributes, true); err != nil {
		return nil, opErr(op, err)
	}
	if t.fifo != strings.HasSuffix(name, ".fifo") {
		return nil, opErr(op, invalidParam("Topic Name: a FIFO topic's name ends in .fifo, and only a FIFO topic's (FifoTopic=true)"))
	}
	if old := s.topics[t.arn]; old != nil {
		if old.fifo != t.fifo || old.contentDedup != t.contentDedup || old.maxSize != t.maxSize {
			return nil, opErr(op, invalidParam("Topic already exists with different attributes"))
		}
		return &sns.CreateTopicOutput{TopicArn: aws.String(old.arn)}, nil
	}
	s.topics[t.arn] = t
	return &sns.CreateTopicOutput{TopicArn: aws.String(t.arn)}, nil
}

// DeleteTopic deletes a topic and its subscriptions; deleting one that does
// not exist succeeds, as on SNS.
func (s *Server) DeleteTopic(ctx context.Context, in *sns.DeleteTopicInput, _ ...func(*sns.Options)) (*sns.DeleteTopicOutput, error) {
	const op = "DeleteTopic"
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if aws.ToString(in.TopicArn) == "" {
		return nil, opErr(op, invalidParam("TopicArn is required"))
	}
	if t := s.topics[*in.TopicArn]; t != nil {
		for _, sub := range t.subs {
			delete(s.subs, sub.arn)
		}
		delete(s.topics, t.arn)
	}
	return &sns.DeleteTopicOutput{}, nil
}

// GetTopicAttributes returns a topic's attributes.
func (s *Server) GetTopicAttributes(ctx context.Context, in *sns.GetTopicAttributesInput, _ ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error) {
	const op = "GetTopicAttributes"
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string]string{
		"TopicArn": t.arn, "Owner": s.account, "FifoTopic": strconv.FormatBool(t.fifo),
		"ContentBasedDeduplication": strconv.FormatBool(t.contentDedup), "MaximumMessageSize": strconv.Itoa(t.maxSize),
		"SubscriptionsConfirmed": strconv.Itoa(len(t.subs)), "SubscriptionsPending": "0", "SubscriptionsDeleted": "0",
	}
	if !t.fifo {
		delete(out, "FifoTopic")
		delete(out, "ContentBasedDeduplication")
	}
	for k, v := range t.attrs {
		out[k] = v
	}
	return &sns.GetTopicAttributesOutput{Attributes: out}, nil
}

// SetTopicAttributes sets one attribute of a topic.
func (s *Server) SetTopicAttributes(ctx context.Context, in *sns.SetTopicAttributesInput, _ ...func(*sns.Options)) (*sns.SetTopicAttributesOutput, error) {
	const op = "SetTopicAttributes"
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := t.apply(map[string]string{aws.ToString(in.AttributeName): aws.ToString(in.AttributeValue)}, false); err != nil {
		return nil, opErr(op, err)
	}
	return &sns.SetTopicAttributesOutput{}, nil
}

// ---------------------------------------------------------------- subscriptions

// Subscribe subscribes an SQS queue (protocol "sqs", endpoint the queue's
// ARN) to a topic, confirmed at once as SNS does for a queue of the same
// account. Attributes: RawMessageDelivery, FilterPolicy,
// FilterPolicyScope (MessageAttributes only). Subscribing the same queue
// again with the same attributes returns the same subscription.
func (s *Server) Subscribe(ctx context.Context, in *sns.SubscribeInput, _ ...func(*sns.Options)) (*sns.SubscribeOutput, error) {
	const op = "Subscribe"
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if p := aws.ToString(in.Protocol); p != "sqs" {
		return nil, opErr(op, invalidParam("Protocol %q: memsns delivers to SQS queues only (protocol sqs)", p))
	}
	qarn := aws.ToString(in.Endpoint)
	parts := strings.Split(qarn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return nil, opErr(op, invalidParam("SQS endpoint ARN %q", qarn))
	}
	if !t.fifo && strings.HasSuffix(parts[5], ".fifo") {
		return nil, opErr(op, invalidParam("Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics"))
	}
	sub := &subscription{topic: t, queueARN: qarn, attrs: map[string]string{}}
	if err := sub.apply(in.Attributes); err != nil {
		return nil, opErr(op, err)
	}
	for _, old := range t.subs {
		if old.queueARN == qarn {
			if old.raw != sub.raw || old.attrs["FilterPolicy"] != sub.attrs["FilterPolicy"] {
				return nil, opErr(op, invalidParam("Attributes Reason: Subscription already exists with different attributes"))
			}
			return &sns.SubscribeOutput{SubscriptionArn: aws.String(old.arn)}, nil
		}
	}
	sub.arn = t.arn + ":" + s.newID()
	t.subs = append(t.subs, sub)
	s.subs[sub.arn] = sub
	return &sns.SubscribeOutput{SubscriptionArn: aws.String(sub.arn)}, nil
}

var subSettable = map[string]bool{
	"RawMessageDelivery": true, "FilterPolicy": true, "FilterPolicyScope": true, "RedrivePolicy": true,
	"DeliveryPolicy": true, "SubscriptionRoleArn": true,
}

func (sub *subscription) apply(attrs map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		if !subSettable[k] {
			return invalidParam("Attributes Reason: unknown subscription attribute %s", k)
		}
		switch k {
		case "RawMessageDelivery":
			raw, err := boolAttr(k, v)
			if err != nil {
				return err
			}
			sub.raw = raw
		case "FilterPolicyScope":
			if v != "MessageAttributes" && v != "" {
				return invalidParam("FilterPolicyScope %q: memsns filters on MessageAttributes only", v)
			}
		case "FilterPolicy":
			if v == "" {
				sub.filter = nil
				break
			}
			f, err := parseFilterPolicy(v)
			if err != nil {
				return err
			}
			sub.filter = f
		}
		sub.attrs[k] = v
	}
	return nil
}

// Unsubscribe deletes a subscription; deleting one that does not exist
// fails with NotFound.
func (s *Server) Unsubscribe(ctx context.Context, in *sns.UnsubscribeInput, _ ...func(*sns.Options)) (*sns.UnsubscribeOutput, error) {
	const op = "Unsubscribe"
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sub := s.subs[aws.ToString(in.SubscriptionArn)]
	if sub == nil {
		return nil, opErr(op, notFound("Subscription"))
	}
	delete(s.subs, sub.arn)
	t := sub.topic
	for i, x := range t.subs {
		if x == sub {
			t.subs = append(t.subs[:i:i], t.subs[i+1:]...)
			break
		}
	}
	return &sns.UnsubscribeOutput{}, nil
}

// GetSubscriptionAttributes returns a subscription's attributes.
func (s *Server) GetSubscriptionAttributes(ctx context.Context, in *sns.GetSubscriptionAttributesInput, _ ...func(*sns.Options)) (*sns.GetSubscriptionAttributesOutput, error) {
	const op = "GetSubscriptionAttributes"
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sub := s.subs[aws.ToString(in.SubscriptionArn)]
	if sub == nil {
		return nil, opErr(op, notFound("Subscription"))
	}
	out := map[string]string{
		"SubscriptionArn": sub.arn, "TopicArn": sub.topic.arn, "Protocol": "sqs", "Endpoint": sub.queueARN,
		"Owner": s.account, "ConfirmationWasAuthenticated": "true", "PendingConfirmation": "false",
		"RawMessageDelivery": strconv.FormatBool(sub.raw),
	}
	for k, v := range sub.attrs {
		if k != "RawMessageDelivery" {
			out[k] = v
		}
	}
	return &sns.GetSubscriptionAttributesOutput{Attributes: out}, nil
}

// SetSubscriptionAttributes sets one attribute of a subscription.
func (s *Server) SetSubscriptionAttributes(ctx context.Context, in *sns.SetSubscriptionAttributesInput, _ ...func(*sns.Options)) (*sns.SetSubscriptionAttributesOutput, error) {
	const op = "SetSubscriptionAttributes"
	if err := s.enter(ctx, op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sub := s.subs[aws.ToString(in.SubscriptionArn)]
	if sub == nil {
		return nil, opErr(op, notFound("Subscription"))
	}
	if err := sub.apply(map[string]string{aws.ToString(in.AttributeName): aws.ToString(in.AttributeValue)}); err != nil {
		return nil, opErr(op, err)
	}
	return &sns.SetSubscriptionAttributesOutput{}, nil
}

// ListSubscriptionsByTopic lists a topic's subscriptions, all in one page.
func (s *Server) ListSubscriptionsByTopic(ctx context.Context, in *sns.ListSubscriptionsByTopicInput, _ ...func(*sns.Options)) (*sns.ListSubscriptionsByTopicOutput, error) {
	const op = "ListSubscriptionsByTopic"
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := &sns.ListSubscriptionsByTopicOutput{}
	for _, sub := range t.subs {
		out.Subscriptions = append(out.Subscriptions, types.Subscription{SubscriptionArn: aws.String(sub.arn),
			TopicArn: aws.String(t.arn), Protocol: aws.String("sqs"), Endpoint: aws.String(sub.queueARN), Owner: aws.String(s.account)})
	}
	return out, nil
}
