package memsns

import (
	"context"
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/snsmsg"
)

// pubReq is one publication, from Publish or a batch entry.
type pubReq struct {
	message   *string
	subject   *string
	structure *string
	attrs     map[string]types.MessageAttributeValue
	group     *string
	dedupID   *string
}

// size is what SNS counts against MaximumMessageSize: the message and,
// for each attribute, its name, type and value.
func (r pubReq) size() int {
	n := len(aws.ToString(r.message))
	for k, v := range r.attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

func (t *topic) validate(r pubReq) error {
	switch {
	case r.message == nil || *r.message == "":
		return invalidParam("Message: Empty message")
	case aws.ToString(r.structure) != "":
		return invalidParam("MessageStructure: memsns publishes plain messages only")
	case r.subject != nil && (*r.subject == "" || len(*r.subject) > maxSubject):
		return invalidParam("Subject: 1 to 100 characters")
	}
	for _, k := range slices.Sorted(maps.Keys(r.attrs)) {
		v := r.attrs[k]
		dt := aws.ToString(v.DataType)
		base, _, _ := strings.Cut(dt, ".")
		switch {
		case !memsqs.ValidAttributeName(k):
			return invalidParam("The message attribute name '%s' is invalid", k)
		case base == "String" || base == "Number":
			if aws.ToString(v.StringValue) == "" {
				return invalidParam("The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", k, dt)
			}
		case base == "Binary":
			if len(v.BinaryValue) == 0 {
				return invalidParam("The message attribute '%s' must contain non-empty message attribute value for message attribute type 'Binary'.", k)
			}
		default:
			return invalidParam("The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", k)
		}
	}
	if n := r.size(); n > t.maxSize {
		return invalidParam("Message too long. Message must be shorter than %d bytes.", t.maxSize)
	}
	if r.group != nil && !memsqs.ValidMessageID(*r.group) {
		return invalidParam("MessageGroupId Reason: 1 to 128 alphanumeric and punctuation characters")
	}
	if r.dedupID != nil && !memsqs.ValidMessageID(*r.dedupID) {
		return invalidParam("MessageDeduplicationId Reason: 1 to 128 alphanumeric and punctuation characters")
	}
	if t.fifo {
		switch {
		case aws.ToString(r.group) == "":
			return invalidParam("The MessageGroupId parameter is required for FIFO topics")
		case aws.ToString(r.dedupID) == "" && !t.contentDedup:
			return invalidParam("The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
	} else if r.dedupID != nil {
		return invalidParam("MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type")
	}
	return nil
}

// publish records a validated publication and delivers it. It returns its
// message id and sequence number (the first publication's, for a
// duplicate within the window, which is delivered to nobody).
func (s *Server) publish(ctx context.Context, t *topic, r pubReq) (id, seq string) {
	now := s.clock.Now()
	var dedupID string
	if t.fifo {
		t.expireDedup(now)
		dedupID = aws.ToString(r.dedupID)
		if dedupID == "" {
			dedupID = contentHash(*r.message)
		}
		if e, ok := t.dedup[dedupID]; ok {
			return e.messageID, e.seq
		}
		seq = t.nextSeq()
	}
	id = s.newID()
	if t.fifo {
		t.dedup[dedupID] = dedupEntry{messageID: id, seq: seq, at: now}
	}
	for _, sub := range t.subs {
		if sub.filter != nil && !sub.filter.match(r.attrs) {
			continue
		}
		in, ok := s.delivery(t, sub, r, id, seq, dedupID, now)
		if !ok {
			continue
		}
		if !s.deliver(ctx, sub, in) {
			s.failed++
		}
	}
	return id, seq
}

// delivery is the SendMessage SNS makes for sub; ok is false when SNS
// discards the publication for it (raw delivery of over 10 attributes).
func (s *Server) delivery(t *topic, sub *subscription, r pubReq, id, seq, dedupID string, now time.Time) (*sqs.SendMessageInput, bool) {
	qname := sub.queueARN[strings.LastIndexByte(sub.queueARN, ':')+1:]
	in := &sqs.SendMessageInput{}
	if t.fifo && strings.HasSuffix(qname, ".fifo") {
		in.MessageGroupId = aws.String(*r.group)
		in.MessageDeduplicationId = aws.String(dedupID)
	}
	if sub.raw {
		if len(r.attrs) > MaxRawAttributes {
			return nil, false
		}
		in.MessageBody = aws.String(*r.message)
		if len(r.attrs) > 0 {
			in.MessageAttributes = make(map[string]sqstypes.MessageAttributeValue, len(r.attrs))
			for k, v := range r.attrs {
				in.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue,
					BinaryValue: append([]byte(nil), v.BinaryValue...)}
			}
		}
		return in, true
	}
	e := snsmsg.Envelope{
		Type: "Notification", MessageID: id, SequenceNumber: seq, TopicARN: t.arn, Subject: aws.ToString(r.subject),
		Message: *r.message, Timestamp: now.UTC().Format(snsmsg.TimestampLayout),
		SignatureVersion: "1", Signature: "EXAMPLE",
		SigningCertURL: "https://sns." + s.region + ".amazonaws.com/SimpleNotificationService-0000000000000000000000.pem",
		UnsubscribeURL: "https://sns." + s.region + ".amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + sub.arn,
	}
	if len(r.attrs) > 0 {
		e.MessageAttributes = make(map[string]snsmsg.Attribute, len(r.attrs))
		for k, v := range r.attrs {
			val := aws.ToString(v.StringValue)
			if v.BinaryValue != nil {
				val = base64.StdEncoding.EncodeToString(v.BinaryValue)
			}
			e.MessageAttributes[k] = snsmsg.Attribute{Type: aws.ToString(v.DataType), Value: val}
		}
	}
	body, err := snsmsg.Marshal(e)
	if err != nil {
		return nil, false
	}
	in.MessageBody = aws.String(body)
	return in, true
}

// deliver sends in to sub's queue, resolving its URL on first use. SNS
// delivers what it accepted whatever became of the publisher's request,
// so the send does not follow ctx's cancellation (its values it keeps).
func (s *Server) deliver(ctx context.Context, sub *subscription, in *sqs.SendMessageInput) bool {
	ctx = context.WithoutCancel(ctx)
	if sub.queueURL == "" {
		name := sub.queueARN[strings.LastIndexByte(sub.queueARN, ':')+1:]
		out, err := s.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return false
		}
		sub.queueURL = aws.ToString(out.QueueUrl)
	}
	in.QueueUrl = aws.String(sub.queueURL)
	if _, err := s.sqs.SendMessage(ctx, in); err != nil {
		sub.queueURL = ""
		return false
	}
	return true
}

// Publish publishes a message to a topic (TopicArn; TargetArn and
// PhoneNumber are not implemented) and delivers it to every subscription
// whose filter policy matches, before it returns.
func (s *Server) Publish(ctx context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	const op = "Publish"
	if in.TargetArn != nil || in.PhoneNumber != nil {
		return nil, opErr(op, invalidParam("memsns publishes to topics only (TopicArn)"))
	}
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := pubReq{message: in.Message, subject: in.Subject, structure: in.MessageStructure, attrs: in.MessageAttributes,
		group: in.MessageGroupId, dedupID: in.MessageDeduplicationId}
	if err := t.validate(r); err != nil {
		return nil, opErr(op, err)
	}
	id, seq := s.publish(ctx, t, r)
	out := &sns.PublishOutput{MessageId: aws.String(id)}
	if seq != "" {
		out.SequenceNumber = aws.String(seq)
	}
	return out, nil
}

// PublishBatch publishes up to 10 messages to a topic, in order, each
// entry succeeding or failing on its own; the request fails as a whole
// when it is empty or has more than 10 entries, an id repeats or is
// invalid, or the messages together pass the topic's MaximumMessageSize.
func (s *Server) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	const op = "PublishBatch"
	t, err := s.enterTopic(ctx, op, in.TopicArn)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ents := in.PublishBatchRequestEntries
	switch {
	case len(ents) == 0:
		return nil, opErr(op, &types.EmptyBatchRequestException{Message: aws.String("The batch request doesn't contain any entries.")})
	case len(ents) > MaxBatchEntries:
		return nil, opErr(op, &types.TooManyEntriesInBatchRequestException{Message: aws.String("The batch request contains more entries than permissible.")})
	}
	seen := map[string]bool{}
	total := 0
	for _, e := range ents {
		id := aws.ToString(e.Id)
		if !validBatchEntryID(id) {
			return nil, opErr(op, &types.InvalidBatchEntryIdException{Message: aws.String("The Id of a batch entry in a batch request doesn't abide by the specification.")})
		}
		if seen[id] {
			return nil, opErr(op, &types.BatchEntryIdsNotDistinctException{Message: aws.String("Two or more batch entries in the request have the same Id.")})
		}
		seen[id] = true
		total += pubReq{message: e.Message, attrs: e.MessageAttributes}.size()
	}
	if total > t.maxSize {
		return nil, opErr(op, &types.BatchRequestTooLongException{Message: aws.String("The length of all the messages put together is more than the limit.")})
	}
	out := &sns.PublishBatchOutput{}
	for _, e := range ents {
		r := pubReq{message: e.Message, subject: e.Subject, structure: e.MessageStructure, attrs: e.MessageAttributes,
			group: e.MessageGroupId, dedupID: e.MessageDeduplicationId}
		if err := t.validate(r); err != nil {
			msg := err.Error()
			if ip, ok := err.(*types.InvalidParameterException); ok { //nolint:errorlint // made here, never wrapped
				msg = aws.ToString(ip.Message)
			}
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameter"),
				Message: aws.String(msg), SenderFault: true})
			continue
		}
		id, seq := s.publish(ctx, t, r)
		ok := types.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String(id)}
		if seq != "" {
			ok.SequenceNumber = aws.String(seq)
		}
		out.Successful = append(out.Successful, ok)
	}
	return out, nil
}
