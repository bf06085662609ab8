// Package snsmsg is the JSON envelope SNS wraps a publication in when it
// delivers it to an SQS queue with raw message delivery off: its fields,
// and the strict parse a worker on a subscribed queue applies to a body.
// The in-memory SNS (internal/memsns) writes envelopes with Marshal, so the
// fake and the worker agree on one definition, and the contract suite holds
// both to what the emulator sends.
package snsmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// MaxMessageBytes is the largest message SNS publishes (a topic's
// MaximumMessageSize can be at most 1 MiB; 256 KiB by default): an
// envelope whose Message is longer did not come from SNS.
const MaxMessageBytes = 1 << 20

// Attribute is one message attribute inside an envelope.
type Attribute struct {
	Type  string `json:"Type"`
	Value string `json:"Value"` // base64 for a Binary attribute
}

// Envelope is SNS's notification as an SQS queue receives it with raw
// message delivery off. SequenceNumber is set for a FIFO topic. The
// publisher's MessageGroupId and MessageDeduplicationId are not in it: a
// FIFO queue carries them as the SQS message's own MessageGroupId and
// MessageDeduplicationId.
type Envelope struct {
	Type              string               `json:"Type"`
	MessageID         string               `json:"MessageId"`
	SequenceNumber    string               `json:"SequenceNumber,omitempty"`
	TopicARN          string               `json:"TopicArn"`
	Subject           string               `json:"Subject,omitempty"`
	Message           string               `json:"Message"`
	Timestamp         string               `json:"Timestamp"`
	SignatureVersion  string               `json:"SignatureVersion,omitempty"`
	Signature         string               `json:"Signature,omitempty"`
	SigningCertURL    string               `json:"SigningCertURL,omitempty"`
	UnsubscribeURL    string               `json:"UnsubscribeURL,omitempty"`
	MessageAttributes map[string]Attribute `json:"MessageAttributes,omitempty"`
}

// TimestampLayout is the envelope's Timestamp: ISO 8601, UTC, milliseconds.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// Marshal writes e as SNS does: its fields in SNS's order, HTML characters
// not escaped.
func Marshal(e Envelope) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// ErrNotEnvelope is the cause of every Parse failure.
var ErrNotEnvelope = errors.New("not an SNS notification envelope")

// Parse reads body as an SNS envelope, strictly: a JSON object with Type
// "Notification", a MessageId, a TopicArn that is an SNS topic's ARN, a
// Message (present, possibly empty only if SNS allowed it: it does not)
// of at most MaxMessageBytes, a Timestamp in SNS's layout, and message
// attributes each with a Type and a Value. Unknown fields are allowed (SNS
// may add some). The error wraps ErrNotEnvelope and says what is wrong.
func Parse(body string) (Envelope, error) {
	var e Envelope
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		return e, fmt.Errorf("%w: the body is not a JSON object", ErrNotEnvelope)
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return e, fmt.Errorf("%w: %w", ErrNotEnvelope, err)
	}
	var missing []string
	for _, k := range []string{"Type", "MessageId", "TopicArn", "Message", "Timestamp"} {
		if _, ok := raw[k]; !ok {
			missing = append(missing, k)
		}
	}
	switch {
	case len(missing) > 0:
		return e, fmt.Errorf("%w: no %s", ErrNotEnvelope, strings.Join(missing, ", "))
	case e.Type != "Notification":
		return e, fmt.Errorf("%w: Type is %q, not \"Notification\"", ErrNotEnvelope, e.Type)
	case e.MessageID == "":
		return e, fmt.Errorf("%w: empty MessageId", ErrNotEnvelope)
	case !isTopicARN(e.TopicARN):
		return e, fmt.Errorf("%w: TopicArn %q is not an SNS topic ARN", ErrNotEnvelope, e.TopicARN)
	case e.Message == "":
		return e, fmt.Errorf("%w: empty Message", ErrNotEnvelope)
	case len(e.Message) > MaxMessageBytes:
		return e, fmt.Errorf("%w: Message of %d bytes, past SNS's limit of %d", ErrNotEnvelope, len(e.Message), MaxMessageBytes)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Timestamp); err != nil {
		return e, fmt.Errorf("%w: Timestamp %q is not ISO 8601", ErrNotEnvelope, e.Timestamp)
	}
	for _, k := range slices.Sorted(maps.Keys(e.MessageAttributes)) {
		if a := e.MessageAttributes[k]; a.Type == "" {
			return e, fmt.Errorf("%w: message attribute %q has no Type", ErrNotEnvelope, k)
		}
	}
	return e, nil
}

// Time is the envelope's Timestamp; zero when it does not parse.
func (e Envelope) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	return t
}

func isTopicARN(s string) bool {
	p := strings.Split(s, ":")
	return len(p) == 6 && p[0] == "arn" && p[2] == "sns" && p[5] != ""
}
