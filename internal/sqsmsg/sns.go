package sqsmsg

import (
	"fmt"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/snsmsg"
)

// Subscription says that a queue is subscribed to an SNS topic, and how.
type Subscription struct {
	// Topic is the topic's ARN; empty: any topic.
	Topic string
	// Raw is the subscription's RawMessageDelivery: the body is the
	// published message and its attributes are the SQS message's.
	Raw bool
}

// Unwrap turns m, a message of a queue subscribed to an SNS topic, into
// the published message: with raw delivery off its body must be SNS's
// envelope (snsmsg.Parse), whose Message becomes the body and whose String
// and Number attributes become the attributes; its facts go to
// Notification. Group, DedupID and SequenceNumber stay the SQS message's
// (SNS carries the publisher's group and deduplication id to a FIFO
// queue). With raw delivery on only the topic is known. The error, a
// permanent failure, says why the body is not what the subscription
// sends.
func Unwrap(m effect.Message, sub Subscription) (effect.Message, error) {
	if sub.Raw {
		m.Notification = &effect.Notification{TopicARN: sub.Topic}
		return m, nil
	}
	e, err := snsmsg.Parse(m.Body)
	if err != nil {
		return m, effect.Permanent(fmt.Errorf("queue %s is subscribed to an SNS topic with raw message delivery off: %w", m.QueueName, err))
	}
	if sub.Topic != "" && e.TopicARN != sub.Topic {
		return m, effect.Permanent(fmt.Errorf("queue %s is subscribed to %s, and the envelope comes from %s", m.QueueName, sub.Topic, e.TopicARN))
	}
	m.Body = e.Message
	m.Attributes = nil
	for k, a := range e.MessageAttributes {
		if a.Type == "Binary" || len(a.Type) > 7 && a.Type[:7] == "Binary." {
			continue
		}
		if m.Attributes == nil {
			m.Attributes = make(map[string]string, len(e.MessageAttributes))
		}
		m.Attributes[k] = a.Value
	}
	m.Notification = &effect.Notification{TopicARN: e.TopicARN, MessageID: e.MessageID, SequenceNumber: e.SequenceNumber,
		Subject: e.Subject, Timestamp: e.Time()}
	return m, nil
}
