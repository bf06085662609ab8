package snsmsg_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/snsmsg"
)

func good() snsmsg.Envelope {
	return snsmsg.Envelope{Type: "Notification", MessageID: "m-1", SequenceNumber: "10000000000000000001",
		TopicARN: "arn:aws:sns:us-east-1:000000000000:t.fifo", Message: `{"a":"<b>"}`, Timestamp: "2026-01-01T00:00:00.000Z",
		MessageAttributes: map[string]snsmsg.Attribute{"idempotency-key": {Type: "String", Value: "k"}}}
}

func TestMarshalParseRoundTrip(t *testing.T) {
	t.Parallel()
	body, err := snsmsg.Marshal(good())
	require.NoError(t, err)
	require.Contains(t, body, `<b>`, "HTML characters are not escaped, as SNS writes them")
	require.True(t, strings.HasPrefix(body, `{"Type":"Notification","MessageId":"m-1","SequenceNumber":`), body)
	e, err := snsmsg.Parse(body)
	require.NoError(t, err)
	require.Equal(t, good(), e)
}

func TestParseIsStrict(t *testing.T) {
	t.Parallel()
	mut := func(f func(*snsmsg.Envelope)) string {
		e := good()
		f(&e)
		b, err := snsmsg.Marshal(e)
		require.NoError(t, err)
		return b
	}
	for name, c := range map[string]struct{ body, reason string }{
		"plain text":      {"hello", "not a JSON object"},
		"JSON array":      {"[1]", "not a JSON object"},
		"other JSON":      {`{"amount":5}`, "no Type, MessageId, TopicArn, Message, Timestamp"},
		"subscription":    {mut(func(e *snsmsg.Envelope) { e.Type = "SubscriptionConfirmation" }), `Type is "SubscriptionConfirmation"`},
		"empty id":        {mut(func(e *snsmsg.Envelope) { e.MessageID = "" }), "empty MessageId"},
		"not a topic":     {mut(func(e *snsmsg.Envelope) { e.TopicARN = "arn:aws:sqs:us-east-1:0:q" }), "not an SNS topic ARN"},
		"empty message":   {mut(func(e *snsmsg.Envelope) { e.Message = "" }), "empty Message"},
		"message too big": {mut(func(e *snsmsg.Envelope) { e.Message = strings.Repeat("x", snsmsg.MaxMessageBytes+1) }), "past SNS's limit"},
		"bad timestamp":   {mut(func(e *snsmsg.Envelope) { e.Timestamp = "yesterday" }), "not ISO 8601"},
		"typeless attr":   {mut(func(e *snsmsg.Envelope) { e.MessageAttributes["x"] = snsmsg.Attribute{Value: "v"} }), `"x" has no Type`},
		"wrong types":     {`{"Type":1,"MessageId":"m","TopicArn":"arn:aws:sns:r:a:t","Message":"x","Timestamp":"2026-01-01T00:00:00Z"}`, "cannot unmarshal"},
	} {
		_, err := snsmsg.Parse(c.body)
		require.ErrorIs(t, err, snsmsg.ErrNotEnvelope, name)
		require.ErrorContains(t, err, c.reason, name)
	}
	_, err := snsmsg.Parse(mut(func(e *snsmsg.Envelope) { e.Message = strings.Repeat("x", snsmsg.MaxMessageBytes) }))
	require.NoError(t, err, "a Message of exactly the limit")
}
