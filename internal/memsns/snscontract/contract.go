// Package snscontract is the contract an SNS implementation must meet for a
// fan-out path: FIFO topics delivering to FIFO queues in group order with
// the group and the deduplication id carried, the envelope's fields with
// raw message delivery off and the attributes with it on, the topic's
// deduplication window, filter policies on message attributes, standard
// topics, and SNS's limits. The same suite runs against the in-memory SNS
// and SQS (internal/memsns, internal/memsqs) and against an emulator
// (fauxqs) or AWS, so that fast tests do not rest on behaviour the real
// thing lacks.
//
// Known gaps of an implementation are declared as Quirks; with a quirk set
// the suite asserts the weaker behaviour that implementation has instead,
// so that a declaration goes stale loudly. The in-memory SNS runs with none.
package snscontract

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/snsmsg"
)

// SNS is the part of the SNS API the contract exercises. *sns.Client and
// *memsns.Server satisfy it.
type SNS interface {
	CreateTopic(ctx context.Context, in *sns.CreateTopicInput, optFns ...func(*sns.Options)) (*sns.CreateTopicOutput, error)
	DeleteTopic(ctx context.Context, in *sns.DeleteTopicInput, optFns ...func(*sns.Options)) (*sns.DeleteTopicOutput, error)
	GetTopicAttributes(ctx context.Context, in *sns.GetTopicAttributesInput, optFns ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error)
	Subscribe(ctx context.Context, in *sns.SubscribeInput, optFns ...func(*sns.Options)) (*sns.SubscribeOutput, error)
	Unsubscribe(ctx context.Context, in *sns.UnsubscribeInput, optFns ...func(*sns.Options)) (*sns.UnsubscribeOutput, error)
	GetSubscriptionAttributes(ctx context.Context, in *sns.GetSubscriptionAttributesInput, optFns ...func(*sns.Options)) (*sns.GetSubscriptionAttributesOutput, error)
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// SQS is the part of the SQS API the contract reads the queues with.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Quirks are documented deviations from AWS of the implementation under test.
type Quirks struct {
	// NoSequenceNumber: a FIFO topic's Publish and PublishBatch return no
	// SequenceNumber, and its envelope has none (fauxqs 2.4.1). AWS sets
	// both, the same 20-digit number.
	NoSequenceNumber bool
	// Unenforced names the limits (Limit* constants) the implementation
	// accepts past SNS's documented value; their cases then assert that it
	// does accept instead of the refusal SNS makes.
	Unenforced []Limit
}

// Limit names an SNS limit with a contract case (docs/DESIGN.md lists each,
// under Limits).
type Limit string

// The limits the contract checks, each at the documented value and one past.
const (
	// LimitMessageSize: a message with its attributes' names, types and
	// values at most the topic's MaximumMessageSize, 262,144 bytes by
	// default (API_Publish, Message).
	LimitMessageSize Limit = "MessageSize"
	// LimitBatchEntries: 1 to 10 entries (API_PublishBatch), else
	// EmptyBatchRequest or TooManyEntriesInBatchRequest.
	LimitBatchEntries Limit = "BatchEntries"
	// LimitBatchSize: a batch's messages together at most
	// MaximumMessageSize, else BatchRequestTooLong (API_PublishBatch).
	LimitBatchSize Limit = "BatchSize"
	// LimitBatchEntryID: entry ids distinct, up to 80 alphanumerics,
	// hyphens and underscores (PublishBatchRequestEntry.Id).
	LimitBatchEntryID Limit = "BatchEntryID"
	// LimitFIFOIDs: a FIFO topic takes a publication only with a
	// MessageGroupId, and a MessageDeduplicationId unless the topic has
	// content-based deduplication (API_Publish).
	LimitFIFOIDs Limit = "FIFOIDs"
	// LimitMessageIDLength: MessageGroupId and MessageDeduplicationId up
	// to 128 alphanumeric and punctuation characters (API_Publish).
	LimitMessageIDLength Limit = "MessageIDLength"
	// LimitRawAttributes: a publication with more than 10 message
	// attributes is discarded for an SQS subscription with raw message
	// delivery (SNSMessageAttributes), and still delivered to one without.
	LimitRawAttributes Limit = "RawAttributes"
	// LimitStandardToFIFO: a standard topic takes no FIFO queue as a
	// subscriber (Subscribe fails).
	LimitStandardToFIFO Limit = "StandardToFIFO"
)

func (q Quirks) unenforced(l Limit) bool {
	for _, u := range q.Unenforced {
		if u == l {
			return true
		}
	}
	return false
}

// Target is the implementation under test.
type Target struct {
	SNS SNS
	SQS SQS
	// NewQueue creates a throwaway queue (FIFO when fifo) with
	// VisibilityTimeout 30 and deletes it when the test ends.
	NewQueue func(t testing.TB, fifo bool) (url string)
	Quirks   Quirks
}

// Run runs the contract against target. The subtests run in parallel.
func Run(t *testing.T, target Target) {
	c := &suite{Target: target}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"FIFO/FanOutInGroupOrder", c.fifoFanOut},
		{"FIFO/EnvelopeFields", c.envelope},
		{"FIFO/RawCarriesAttributes", c.rawAttributes},
		{"FIFO/BatchInOrderWithPerEntryFailures", c.batch},
		{"FIFO/DedupWindowOnTheTopic", c.dedupTopic},
		{"FIFO/ContentBasedDedupCarried", c.contentDedup},
		{"Standard/FanOut", c.standardFanOut},
		{"Subscriptions/FilterPolicy", c.filterPolicy},
		{"Subscriptions/Unsubscribe", c.unsubscribe},
		{"Errors/TopicDoesNotExist", c.noTopic},
		{"Limits/MessageSize", c.limitMessageSize},
		{"Limits/BatchEntries", c.limitBatchEntries},
		{"Limits/BatchSize", c.limitBatchSize},
		{"Limits/BatchEntryID", c.limitBatchEntryID},
		{"Limits/FIFOIDs", c.limitFIFOIDs},
		{"Limits/MessageIDLength", c.limitMessageIDLength},
		{"Limits/RawAttributes", c.limitRawAttributes},
		{"Limits/StandardToFIFO", c.limitStandardToFIFO},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

type suite struct{ Target }

var uniq atomic.Int64

func name(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(uniq.Add(1), 10)
}

func (c *suite) topic(t testing.TB, fifo bool, attrs map[string]string) string {
	t.Helper()
	n := name("t")
	all := map[string]string{}
	if fifo {
		n += ".fifo"
		all["FifoTopic"] = "true"
	}
	for k, v := range attrs {
		all[k] = v
	}
	out, err := c.SNS.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: &n, Attributes: all})
	require.NoError(t, err)
	arn := aws.ToString(out.TopicArn)
	t.Cleanup(func() { _, _ = c.SNS.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: &arn}) })
	return arn
}

func (c *suite) queueARN(t testing.TB, url string) string {
	t.Helper()
	out, err := c.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	return out.Attributes["QueueArn"]
}

// subscribe subscribes a new queue to topic and returns the queue's URL.
func (c *suite) subscribe(t testing.TB, topic string, fifo, raw bool, filter string) (url, subARN string) {
	t.Helper()
	url = c.NewQueue(t, fifo)
	attrs := map[string]string{"RawMessageDelivery": strconv.FormatBool(raw)}
	if filter != "" {
		attrs["FilterPolicy"] = filter
	}
	out, err := c.SNS.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: &topic, Protocol: aws.String("sqs"),
		Endpoint: aws.String(c.queueARN(t, url)), Attributes: attrs, ReturnSubscriptionArn: true})
	require.NoError(t, err)
	return url, aws.ToString(out.SubscriptionArn)
}

func strAttr(v string) snstypes.MessageAttributeValue {
	return snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func (c *suite) publish(t testing.TB, topic, msg, group, dedup string, attrs map[string]snstypes.MessageAttributeValue) *sns.PublishOutput {
	t.Helper()
	in := &sns.PublishInput{TopicArn: &topic, Message: &msg, MessageAttributes: attrs}
	if group != "" {
		in.MessageGroupId = &group
	}
	if dedup != "" {
		in.MessageDeduplicationId = &dedup
	}
	out, err := c.SNS.Publish(context.Background(), in)
	require.NoError(t, err)
	return out
}

// drain receives and deletes until n messages came or timeout passed,
// then checks with one more short poll that no more come.
func (c *suite) drain(t testing.TB, url string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, c.receive(t, url, 1)...)
	}
	require.Len(t, got, n, "messages on %s", url)
	require.Empty(t, c.receive(t, url, 1), "no more messages on %s", url)
	return got
}

func (c *suite) receive(t testing.TB, url string, wait int32) []types.Message {
	t.Helper()
	out, err := c.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		WaitTimeSeconds: wait, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames: []string{"All"}})
	require.NoError(t, err)
	for _, m := range out.Messages {
		_, err := c.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		require.NoError(t, err)
	}
	return out.Messages
}

func envelopeOf(t testing.TB, m types.Message) snsmsg.Envelope {
	t.Helper()
	e, err := snsmsg.Parse(aws.ToString(m.Body))
	require.NoError(t, err, "body %s", aws.ToString(m.Body))
	return e
}

func messages(t testing.TB, ms []types.Message, raw bool) []string {
	t.Helper()
	out := make([]string, len(ms))
	for i, m := range ms {
		if raw {
			out[i] = aws.ToString(m.Body)
		} else {
			out[i] = envelopeOf(t, m).Message
		}
	}
	return out
}

func (c *suite) fifoFanOut(t *testing.T) {
	topic := c.topic(t, true, nil)
	env, _ := c.subscribe(t, topic, true, false, "")
	raw, _ := c.subscribe(t, topic, true, true, "")
	var want []string
	for i := range 4 {
		for _, g := range []string{"g1", "g2"} {
			msg := fmt.Sprintf("%s-%d", g, i)
			c.publish(t, topic, msg, g, "d-"+msg, nil)
			want = append(want, msg)
		}
	}
	for _, q := range []struct {
		url string
		raw bool
	}{{env, false}, {raw, true}} {
		got := c.drain(t, q.url, len(want), 30*time.Second)
		bodies := messages(t, got, q.raw)
		require.ElementsMatch(t, want, bodies, "every publication once, raw=%v", q.raw)
		last := map[string]int{}
		for i, m := range got {
			g := m.Attributes["MessageGroupId"]
			require.True(t, strings.HasPrefix(bodies[i], g+"-"), "the publisher's group is the message's, raw=%v", q.raw)
			require.Equal(t, "d-"+bodies[i], m.Attributes["MessageDeduplicationId"], "the publisher's dedup id is the message's, raw=%v", q.raw)
			n, _ := strconv.Atoi(bodies[i][len(g)+1:])
			require.GreaterOrEqual(t, n, last[g], "group %s in publication order, raw=%v", g, q.raw)
			last[g] = n + 1
		}
	}
}

func (c *suite) envelope(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, sub := c.subscribe(t, topic, true, false, "")
	before := time.Now().Add(-time.Minute)
	out := c.publish(t, topic, `{"a":"<b>&"}`, "g", "d1", map[string]snstypes.MessageAttributeValue{
		"idempotency-key": strAttr("k1"), "n": {DataType: aws.String("Number"), StringValue: aws.String("5")}})
	if c.Quirks.NoSequenceNumber {
		require.Nil(t, out.SequenceNumber, "quirk NoSequenceNumber declared: Publish returns none")
	} else {
		require.Len(t, aws.ToString(out.SequenceNumber), 20, "a FIFO topic's Publish returns a sequence number")
	}
	m := c.drain(t, url, 1, 30*time.Second)[0]
	require.Empty(t, m.MessageAttributes, "with raw delivery off the attributes are in the envelope only")
	e := envelopeOf(t, m)
	require.Equal(t, "Notification", e.Type)
	require.Equal(t, aws.ToString(out.MessageId), e.MessageID, "the envelope's MessageId is Publish's")
	require.Equal(t, topic, e.TopicARN)
	require.JSONEq(t, `{"a":"<b>&"}`, e.Message)
	require.Equal(t, map[string]snsmsg.Attribute{"idempotency-key": {Type: "String", Value: "k1"}, "n": {Type: "Number", Value: "5"}}, e.MessageAttributes)
	require.True(t, e.Time().After(before), "Timestamp %q", e.Timestamp)
	require.Contains(t, e.UnsubscribeURL, sub)
	if c.Quirks.NoSequenceNumber {
		require.Empty(t, e.SequenceNumber, "quirk NoSequenceNumber declared: the envelope has none")
	} else {
		require.Equal(t, aws.ToString(out.SequenceNumber), e.SequenceNumber, "the envelope's SequenceNumber is Publish's")
	}
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(aws.ToString(m.Body)), &fields))
	for _, k := range []string{"Type", "MessageId", "TopicArn", "Message", "Timestamp"} {
		require.Contains(t, fields, k)
	}
}

func (c *suite) rawAttributes(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, _ := c.subscribe(t, topic, true, true, "")
	c.publish(t, topic, "plain body", "g", "d1", map[string]snstypes.MessageAttributeValue{
		"idempotency-key": strAttr("k1"), "n": {DataType: aws.String("Number"), StringValue: aws.String("5")}})
	m := c.drain(t, url, 1, 30*time.Second)[0]
	require.Equal(t, "plain body", aws.ToString(m.Body))
	require.Equal(t, "k1", aws.ToString(m.MessageAttributes["idempotency-key"].StringValue))
	require.Equal(t, "String", aws.ToString(m.MessageAttributes["idempotency-key"].DataType))
	require.Equal(t, "5", aws.ToString(m.MessageAttributes["n"].StringValue))
	require.Equal(t, "Number", aws.ToString(m.MessageAttributes["n"].DataType))
}

func (c *suite) batch(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, _ := c.subscribe(t, topic, true, true, "")
	ents := []snstypes.PublishBatchRequestEntry{
		{Id: aws.String("a"), Message: aws.String("b0"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d0")},
		{Id: aws.String("b"), Message: aws.String("b1"), MessageGroupId: aws.String("g")}, // no dedup id: fails alone
		{Id: aws.String("c"), Message: aws.String("b2"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d2")},
	}
	out, err := c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	require.NoError(t, err)
	require.Len(t, out.Successful, 2)
	require.Len(t, out.Failed, 1)
	require.Equal(t, "b", aws.ToString(out.Failed[0].Id))
	require.Equal(t, "InvalidParameter", aws.ToString(out.Failed[0].Code))
	require.True(t, out.Failed[0].SenderFault)
	if !c.Quirks.NoSequenceNumber {
		require.Less(t, aws.ToString(out.Successful[0].SequenceNumber), aws.ToString(out.Successful[1].SequenceNumber), "sequence numbers grow in entry order")
	}
	require.Equal(t, []string{"b0", "b2"}, messages(t, c.drain(t, url, 2, 30*time.Second), true), "entries delivered in order")
}

func (c *suite) dedupTopic(t *testing.T) {
	topic := c.topic(t, true, nil)
	env, _ := c.subscribe(t, topic, true, false, "")
	raw, _ := c.subscribe(t, topic, true, true, "")
	first := c.publish(t, topic, "one", "g", "same", nil)
	c.publish(t, topic, "two", "g", "same", nil) // a producer retry inside the window, another body even
	c.publish(t, topic, "three", "g", "other", nil)
	_ = first
	require.Equal(t, []string{"one", "three"}, messages(t, c.drain(t, env, 2, 30*time.Second), false))
	require.Equal(t, []string{"one", "three"}, messages(t, c.drain(t, raw, 2, 30*time.Second), true))
}

func (c *suite) contentDedup(t *testing.T) {
	topic := c.topic(t, true, map[string]string{"ContentBasedDeduplication": "true"})
	url, _ := c.subscribe(t, topic, true, true, "")
	c.publish(t, topic, "same body", "g", "", nil)
	c.publish(t, topic, "same body", "g", "", nil)
	got := c.drain(t, url, 1, 30*time.Second)
	require.NotEmpty(t, got[0].Attributes["MessageDeduplicationId"], "the topic's content dedup id is carried to the queue")
}

func (c *suite) standardFanOut(t *testing.T) {
	topic := c.topic(t, false, nil)
	env, _ := c.subscribe(t, topic, false, false, "")
	raw, _ := c.subscribe(t, topic, false, true, "")
	out := c.publish(t, topic, "hello", "", "", map[string]snstypes.MessageAttributeValue{"idempotency-key": strAttr("k")})
	require.Nil(t, out.SequenceNumber, "a standard topic has no sequence numbers")
	m := c.drain(t, env, 1, 30*time.Second)[0]
	e := envelopeOf(t, m)
	require.Equal(t, "hello", e.Message)
	require.Empty(t, e.SequenceNumber)
	require.Equal(t, "k", e.MessageAttributes["idempotency-key"].Value)
	r := c.drain(t, raw, 1, 30*time.Second)[0]
	require.Equal(t, "hello", aws.ToString(r.Body))
	require.Equal(t, "k", aws.ToString(r.MessageAttributes["idempotency-key"].StringValue))
}

func (c *suite) filterPolicy(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, _ := c.subscribe(t, topic, true, true, `{"kind":["deposit",{"prefix":"refund-"}]}`)
	all, _ := c.subscribe(t, topic, true, true, "")
	for i, kind := range []string{"deposit", "withdrawal", "refund-full", "Deposit"} {
		c.publish(t, topic, kind, "g", "d"+strconv.Itoa(i), map[string]snstypes.MessageAttributeValue{"kind": strAttr(kind)})
	}
	c.publish(t, topic, "none", "g", "d-none", nil)
	require.Equal(t, []string{"deposit", "refund-full"}, messages(t, c.drain(t, url, 2, 30*time.Second), true), "exact and prefix, case-sensitive; absent attribute does not match")
	require.Len(t, c.drain(t, all, 5, 30*time.Second), 5)
}

func (c *suite) unsubscribe(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, sub := c.subscribe(t, topic, true, true, "")
	a, err := c.SNS.GetSubscriptionAttributes(context.Background(), &sns.GetSubscriptionAttributesInput{SubscriptionArn: &sub})
	require.NoError(t, err)
	require.Equal(t, "true", a.Attributes["RawMessageDelivery"])
	require.Equal(t, topic, a.Attributes["TopicArn"])
	_, err = c.SNS.Unsubscribe(context.Background(), &sns.UnsubscribeInput{SubscriptionArn: &sub})
	require.NoError(t, err)
	c.publish(t, topic, "after", "g", "d", nil)
	require.Empty(t, c.receive(t, url, 1), "nothing after Unsubscribe")
}

func (c *suite) noTopic(t *testing.T) {
	topic := c.topic(t, true, nil)
	gone := topic[:len(topic)-len(".fifo")] + "gone.fifo"
	_, err := c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &gone, Message: aws.String("x"),
		MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")})
	var nf *snstypes.NotFoundException
	require.ErrorAs(t, err, &nf, "%v", err)
}

// refused checks err for a case past limit l: an API error (of one of
// codes, when given) unless l is declared unenforced, then no error.
func (c *suite) refused(t *testing.T, l Limit, what string, err error, codes ...string) {
	t.Helper()
	if c.Quirks.unenforced(l) {
		require.NoError(t, err, "%s: limit %s declared unenforced", what, l)
		return
	}
	require.Error(t, err, "%s: SNS refuses it", what)
	var ae smithy.APIError
	require.ErrorAs(t, err, &ae, "%s: an API error", what)
	if len(codes) > 0 {
		require.Contains(t, codes, ae.ErrorCode(), "%s: %v", what, err)
	}
}

func (c *suite) limitMessageSize(t *testing.T) {
	topic := c.topic(t, true, nil)
	url, _ := c.subscribe(t, topic, true, true, "")
	// 262,144 bytes: message 262,121, attribute "k" + "String" + 16.
	attrs := map[string]snstypes.MessageAttributeValue{"k": strAttr(strings.Repeat("v", 16))}
	_, err := c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &topic, Message: aws.String(strings.Repeat("b", 262121)),
		MessageAttributes: attrs, MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("at")})
	require.NoError(t, err, "a message with its attributes of exactly 256 KiB")
	_, err = c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &topic, Message: aws.String(strings.Repeat("b", 262122)),
		MessageAttributes: attrs, MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("past")})
	c.refused(t, LimitMessageSize, "one byte past 256 KiB, counting the attribute", err, "InvalidParameter")
	n := 1
	if c.Quirks.unenforced(LimitMessageSize) {
		n = 2
	}
	c.drain(t, url, n, 30*time.Second)
}

func (c *suite) entries(n int, size int) []snstypes.PublishBatchRequestEntry {
	ents := make([]snstypes.PublishBatchRequestEntry, n)
	for i := range ents {
		ents[i] = snstypes.PublishBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), Message: aws.String(strings.Repeat("m", size)),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(name("d"))}
	}
	return ents
}

func (c *suite) limitBatchEntries(t *testing.T) {
	topic := c.topic(t, true, nil)
	out, err := c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: c.entries(10, 1)})
	require.NoError(t, err, "10 entries")
	require.Len(t, out.Successful, 10)
	_, err = c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: c.entries(11, 1)})
	c.refused(t, LimitBatchEntries, "11 entries", err, "TooManyEntriesInBatchRequest")
	_, err = c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: []snstypes.PublishBatchRequestEntry{}})
	c.refused(t, LimitBatchEntries, "no entry", err, "EmptyBatchRequest")
}

func (c *suite) limitBatchSize(t *testing.T) {
	topic := c.topic(t, true, nil)
	ents := c.entries(4, 65536)
	_, err := c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	require.NoError(t, err, "4 × 64 KiB: 256 KiB together")
	ents = c.entries(4, 65536)
	ents[3].Message = aws.String(strings.Repeat("m", 65537))
	_, err = c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	c.refused(t, LimitBatchSize, "one byte past 256 KiB together", err, "BatchRequestTooLong")
}

func (c *suite) limitBatchEntryID(t *testing.T) {
	topic := c.topic(t, true, nil)
	ents := c.entries(2, 1)
	ents[0].Id = aws.String(strings.Repeat("i", 80))
	_, err := c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	require.NoError(t, err, "an id of 80 characters")
	ents = c.entries(2, 1)
	ents[1].Id = ents[0].Id
	_, err = c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	c.refused(t, LimitBatchEntryID, "two entries with one id", err, "BatchEntryIdsNotDistinct")
	ents = c.entries(1, 1)
	ents[0].Id = aws.String(strings.Repeat("i", 81))
	_, err = c.SNS.PublishBatch(context.Background(), &sns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: ents})
	c.refused(t, LimitBatchEntryID, "an id of 81 characters", err, "InvalidBatchEntryId")
}

func (c *suite) limitFIFOIDs(t *testing.T) {
	topic := c.topic(t, true, nil)
	_, err := c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &topic, Message: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	c.refused(t, LimitFIFOIDs, "no MessageGroupId", err, "InvalidParameter")
	_, err = c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &topic, Message: aws.String("x"), MessageGroupId: aws.String("g")})
	c.refused(t, LimitFIFOIDs, "no MessageDeduplicationId, content-based deduplication off", err, "InvalidParameter")
}

func (c *suite) limitMessageIDLength(t *testing.T) {
	topic := c.topic(t, true, nil)
	c.publish(t, topic, "x", strings.Repeat("g", 128), strings.Repeat("d", 128), nil)
	_, err := c.SNS.Publish(context.Background(), &sns.PublishInput{TopicArn: &topic, Message: aws.String("x"), MessageGroupId: aws.String("g"),
		MessageDeduplicationId: aws.String(strings.Repeat("d", 129))})
	c.refused(t, LimitMessageIDLength, "a MessageDeduplicationId of 129 characters", err, "InvalidParameter")
}

func (c *suite) limitRawAttributes(t *testing.T) {
	topic := c.topic(t, true, nil)
	env, _ := c.subscribe(t, topic, true, false, "")
	raw, _ := c.subscribe(t, topic, true, true, "")
	for _, n := range []int{10, 11} {
		attrs := map[string]snstypes.MessageAttributeValue{}
		for i := range n {
			attrs["a"+strconv.Itoa(i)] = strAttr("v")
		}
		c.publish(t, topic, "with "+strconv.Itoa(n), "g", "d"+strconv.Itoa(n), attrs)
	}
	require.Equal(t, []string{"with 10", "with 11"}, messages(t, c.drain(t, env, 2, 30*time.Second), false), "an envelope carries any number")
	want := []string{"with 10"}
	if c.Quirks.unenforced(LimitRawAttributes) {
		want = append(want, "with 11")
	}
	require.Equal(t, want, messages(t, c.drain(t, raw, len(want), 30*time.Second), true), "raw delivery carries at most 10")
}

func (c *suite) limitStandardToFIFO(t *testing.T) {
	topic := c.topic(t, false, nil)
	url := c.NewQueue(t, true)
	_, err := c.SNS.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: &topic, Protocol: aws.String("sqs"),
		Endpoint: aws.String(c.queueARN(t, url)), ReturnSubscriptionArn: true})
	c.refused(t, LimitStandardToFIFO, "a FIFO queue on a standard topic", err, "InvalidParameter")
}
