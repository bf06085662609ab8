// Package sqsmsg holds what every path that touches SQS messages shares,
// with or without the long-poll pool: queue names, the conversion of an SQS
// message into the effect's Message, and the copies that carry a message's
// dedup key to a dead-letter queue and back.
package sqsmsg

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/outbox"
)

// QueueName returns the last path element of a queue URL.
func QueueName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}

// IsFIFO reports whether a queue name or URL is a FIFO queue's.
func IsFIFO(nameOrURL string) bool { return strings.HasSuffix(nameOrURL, ".fifo") }

// ToMessage converts an SQS message into the effect's view of it.
func ToMessage(queueURL string, m types.Message) effect.Message {
	out := effect.Message{
		QueueURL:  queueURL,
		QueueName: QueueName(queueURL),
		ID:        deref(m.MessageId),
		Body:      deref(m.Body),
	}
	sa := m.Attributes
	out.Group = sa[string(types.MessageSystemAttributeNameMessageGroupId)]
	out.DedupID = sa[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
	out.SequenceNumber = sa[string(types.MessageSystemAttributeNameSequenceNumber)]
	out.AWSTraceHeader = sa[string(types.MessageSystemAttributeNameAWSTraceHeader)]
	out.ReceiveCount, _ = strconv.Atoi(sa[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(sa[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		out.SentAt = time.UnixMilli(ms)
	}
	if len(m.MessageAttributes) > 0 {
		out.Attributes = make(map[string]string, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			if v.StringValue != nil {
				out.Attributes[k] = *v.StringValue
			}
		}
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// SequenceLess orders FIFO sequence numbers (decimal strings of up to 20+ digits).
func SequenceLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// maxMessageAttributes is SQS's limit of message attributes per message.
const maxMessageAttributes = 10

// WithKey returns the message attributes to send with a copy of m (to its
// dead-letter queue, or back from it) so that the copy keeps m's dedup key
// under the auto key source, whose fallbacks (MessageDeduplicationId, then
// MessageId) a copy does not keep: the idempotency-key attribute, set to
// what auto read from m when m has none. A key that the copy would lose
// could let an effect that completed run again. attrs is not modified. When
// m already has SQS's ten attributes, none can be added: ok is false.
func WithKey(m effect.Message, attrs map[string]types.MessageAttributeValue) (out map[string]types.MessageAttributeValue, ok bool) {
	if _, has := attrs[dedup.IdempotencyKeyAttribute]; has {
		return attrs, true
	}
	key, err := dedup.KeySource{}.Extract(m) // auto
	if err != nil {
		return attrs, true // no key to keep
	}
	if len(attrs) >= maxMessageAttributes {
		return attrs, false
	}
	out = make(map[string]types.MessageAttributeValue, len(attrs)+1)
	for k, v := range attrs {
		out[k] = v
	}
	s := "String"
	out[dedup.IdempotencyKeyAttribute] = types.MessageAttributeValue{DataType: &s, StringValue: &key}
	return out, true
}

// WithoutFailure returns attrs without the failure attributes of a
// dead-letter copy (a copy of attrs when it had any).
func WithoutFailure(attrs map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	_, a := attrs[FailureAttribute]
	_, b := attrs[FailedAtAttribute]
	if !a && !b {
		return attrs
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs))
	for k, v := range attrs {
		if k != FailureAttribute && k != FailedAtAttribute {
			out[k] = v
		}
	}
	return out
}

// withFailure adds the failure attributes that fit in SQS's ten.
func withFailure(attrs map[string]types.MessageAttributeValue, cause error, at time.Time) map[string]types.MessageAttributeValue {
	if cause == nil || len(attrs) >= maxMessageAttributes {
		return attrs
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs)+2)
	for k, v := range attrs {
		out[k] = v
	}
	s := "String"
	// SQS takes the characters of XML 1.0 in an attribute's value.
	why := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r != 0xFFFE && r != 0xFFFF && r != utf8.RuneError) {
			return r
		}
		return '?'
	}, cause.Error())
	if len(why) > FailureMaxBytes {
		why = strings.ToValidUTF8(why[:FailureMaxBytes], "")
	}
	if why == "" {
		why = "(no message)"
	}
	out[FailureAttribute] = types.MessageAttributeValue{DataType: &s, StringValue: &why}
	if len(out) < maxMessageAttributes && !at.IsZero() {
		when := at.UTC().Format(time.RFC3339)
		out[FailedAtAttribute] = types.MessageAttributeValue{DataType: &s, StringValue: &when}
	}
	return out
}

// ErrNoRoomForKey: a message with SQS's ten message attributes and no
// idempotency-key cannot carry its dedup key to a copy. Such a copy, when
// replayed, would get another key (its MessageDeduplicationId and MessageId
// are not kept), and an effect that completed could run again: it is not
// made; the queue's redrive policy moves the message itself, as it is.
var ErrNoRoomForKey = errors.New("no room for an idempotency-key attribute to carry the dedup key (the message has SQS's 10 message attributes already)")

// CopyDeduplicationID is the MessageDeduplicationId of the dead-letter copy
// of the message with id messageID: "dlq-<MessageId>", or, should that not
// be a valid dedup id (over 128 characters, or characters SQS does not take),
// "dlq-sha256-<hex SHA-256 of the id>".
//
// It is unique per source message and the same for every move of one
// message, so a retried move (its response or the original's delete lost)
// is dropped by SQS as a duplicate within five minutes. The source's own
// dedup id is not reused: a dead-letter queue of a wider deduplication scope
// than the source (a plain FIFO DLQ of a DeduplicationScope=messageGroup
// queue, or one DLQ shared by several queues) would take two distinct
// messages with one id for one, silently drop the second copy with a 200,
// and the original would then be deleted.
func CopyDeduplicationID(messageID string) string {
	id := "dlq-" + messageID
	if outbox.ValidID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(messageID))
	return "dlq-sha256-" + hex.EncodeToString(sum[:])
}

// The attributes a dead-letter copy carries about its failure, when it has
// room for them (after the message's own and its idempotency-key): why, in
// at most FailureMaxBytes, and when. A copy made again replaces them;
// worker redrive takes them off the message it sends back.
const (
	FailureAttribute  = "exactly-failure"
	FailedAtAttribute = "exactly-failed-at"
	FailureMaxBytes   = 256
)

// DeadLetterCopy is the SendMessage that copies m to its queue's dead-letter
// queue: body and message attributes as they came, its dedup key in an
// idempotency-key attribute (WithKey), why and when it failed (cause, at:
// FailureAttribute and FailedAtAttribute, as room allows) and, in a FIFO
// queue, its group and a dedup id of its own (CopyDeduplicationID). It fails
// with ErrNoRoomForKey when the copy cannot carry the dedup key: leave the
// message to the queue's redrive policy then.
func DeadLetterCopy(dlqURL string, fifo bool, m effect.Message, body *string, attrs map[string]types.MessageAttributeValue, cause error, at time.Time) (*sqs.SendMessageInput, error) {
	attrs, ok := WithKey(m, WithoutFailure(attrs))
	if !ok {
		return nil, ErrNoRoomForKey
	}
	attrs = withFailure(attrs, cause, at)
	in := &sqs.SendMessageInput{QueueUrl: &dlqURL, MessageBody: body, MessageAttributes: attrs}
	if fifo {
		if m.ID == "" {
			return nil, errors.New("the message has no MessageId to derive its copy's deduplication id from")
		}
		in.MessageGroupId = &m.Group
		in.MessageDeduplicationId = aws.String(CopyDeduplicationID(m.ID))
	}
	return in, nil
}
