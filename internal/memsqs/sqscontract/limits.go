package sqscontract

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// The limit cases: each sends what AWS takes at the documented limit (it
// must pass) and what is one past it (AWS refuses it; an implementation
// with the limit declared in Quirks.Unenforced must take it instead).

// refused checks err for a case past limit l: an API error (of one of
// codes, when given) unless l is declared unenforced, then no error.
func (c *suite) refused(t *testing.T, l Limit, what string, err error, codes ...string) {
	t.Helper()
	if c.Quirks.unenforced(l) {
		t.Logf("%s: limit %s declared unenforced; got %v", what, l, err)
		return
	}
	require.Error(t, err, "%s: AWS refuses it", what)
	var ae smithy.APIError
	require.ErrorAs(t, err, &ae, "%s: an API error", what)
	if len(codes) > 0 {
		// The JSON protocol's codes; some endpoints prefix the query one's.
		require.Contains(t, codes, strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService."), "%s: %v", what, err)
	}
}

func (c *suite) sendIn(url string, body string, attrs map[string]types.MessageAttributeValue, group, dedup *string) error {
	_, err := c.Client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body,
		MessageAttributes: attrs, MessageGroupId: group, MessageDeduplicationId: dedup})
	return err
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func (c *suite) limitMessageSize(t *testing.T) {
	url, _ := c.NewQueue(t, false, map[string]string{"MaximumMessageSize": "1024"}, 0)
	// 1024 bytes: body 1000, attribute "k" + "String" + 17 bytes of value.
	attrs := map[string]types.MessageAttributeValue{"k": strAttr(strings.Repeat("v", 17))}
	require.NoError(t, c.sendIn(url, strings.Repeat("b", 1000), attrs, nil, nil), "body and attributes of exactly MaximumMessageSize")
	err := c.sendIn(url, strings.Repeat("b", 1001), attrs, nil, nil)
	c.refused(t, LimitMessageSize, "one byte over MaximumMessageSize, counting the attribute", err, "InvalidParameterValue")

	out, err := c.Client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String(strings.Repeat("b", 1000)), MessageAttributes: attrs},
		{Id: aws.String("big"), MessageBody: aws.String(strings.Repeat("b", 1001)), MessageAttributes: attrs},
	}})
	require.NoError(t, err, "an entry too large fails alone")
	if c.Quirks.unenforced(LimitMessageSize) {
		return
	}
	require.Len(t, out.Successful, 1)
	require.Len(t, out.Failed, 1)
	require.Equal(t, "big", aws.ToString(out.Failed[0].Id))
	require.True(t, out.Failed[0].SenderFault)
}

func (c *suite) limitBatchSize(t *testing.T) {
	url, _ := c.NewQueue(t, false, map[string]string{"MaximumMessageSize": "1048576"}, 0)
	batch := func(sizes ...int) error {
		var es []types.SendMessageBatchRequestEntry
		for i, n := range sizes {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String(strings.Repeat("b", n)),
				MessageAttributes: map[string]types.MessageAttributeValue{"k": strAttr("v")}})
		}
		_, err := c.Client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
		return err
	}
	attr := len("k") + len("String") + len("v")
	half := 1<<19 - attr
	require.NoError(t, batch(half, half), "two entries of exactly 1 MiB together")
	c.refused(t, LimitBatchSize, "two entries of 1 MiB and a byte together", batch(half, half+1), "BatchRequestTooLong")
}

func (c *suite) limitBatchEntries(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	send := func(n int) error {
		var es []types.SendMessageBatchRequestEntry
		for i := range n {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String("m")})
		}
		_, err := c.Client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
		return err
	}
	require.NoError(t, send(10))
	c.refused(t, LimitBatchEntries, "11 entries", send(11), "TooManyEntriesInBatchRequest")
}

func (c *suite) limitBatchEntryID(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	send := func(ids ...string) error {
		var es []types.SendMessageBatchRequestEntry
		for _, id := range ids {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String("m")})
		}
		_, err := c.Client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
		return err
	}
	require.NoError(t, send(strings.Repeat("a", 80), "A-z_0"), "80 characters; letters, digits, hyphen, underscore")
	invalid := []string{"InvalidBatchEntryId"}
	c.refused(t, LimitBatchEntryIDLength, "an 81-character entry id", send(strings.Repeat("a", 81)), invalid...)
	c.refused(t, LimitBatchEntryID, "an entry id with a period", send("a.b"), invalid...)
	c.refused(t, LimitBatchEntryID, "two entries with one id", send("same", "same"), "BatchEntryIdsNotDistinct")
}

func (c *suite) limitAttributes(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	attrs := func(n int) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m["a"+strconv.Itoa(i)] = strAttr("v")
		}
		return m
	}
	require.NoError(t, c.sendIn(url, "m", attrs(10), nil, nil), "10 attributes")
	c.refused(t, LimitAttributes, "11 attributes", c.sendIn(url, "m", attrs(11), nil, nil))
}

func (c *suite) limitAttributeName(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	one := func(name, typ string) error {
		return c.sendIn(url, "m", map[string]types.MessageAttributeValue{name: {DataType: aws.String(typ), StringValue: aws.String("1")}}, nil, nil)
	}
	require.NoError(t, one(strings.Repeat("n", 256), "String"), "a 256-character name")
	require.NoError(t, one("a-b_c.d", "Number.custom"), "hyphen, underscore, inner period; a custom type")
	for _, bad := range []string{strings.Repeat("n", 257), "AWS.x", "amazon.x", ".a", "a.", "a..b", "a b", "ä"} {
		c.refused(t, LimitAttributeName, "attribute name "+strconv.Quote(bad), one(bad, "String"))
	}
	c.refused(t, LimitAttributeName, "attribute type Strin", one("k", "Strin"))
}

func (c *suite) limitMessageIDs(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	long := strings.Repeat("x", 128)
	require.NoError(t, c.sendIn(url, "m", nil, aws.String(long), aws.String(long)), "a 128-character group and dedup id")
	require.NoError(t, c.sendIn(url, "m2", nil, aws.String(`!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`+"`"), aws.String(id("p")+"!~")), "punctuation")
	c.refused(t, LimitMessageIDs, "a 129-character group", c.sendIn(url, "m", nil, aws.String(long+"x"), aws.String(id("d"))))
	c.refused(t, LimitMessageIDs, "a 129-character dedup id", c.sendIn(url, "m", nil, aws.String("g"), aws.String(long+"x")))
	c.refused(t, LimitMessageIDs, "a group with a space", c.sendIn(url, "m", nil, aws.String("a b"), aws.String(id("d"))))
	c.refused(t, LimitMessageIDs, "a dedup id with a non-ASCII letter", c.sendIn(url, "m", nil, aws.String("g"), aws.String("é"+id("d"))))
}

func (c *suite) limitReceive(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	recv := func(in sqs.ReceiveMessageInput) error {
		in.QueueUrl = &url
		_, err := c.Client.ReceiveMessage(context.Background(), &in)
		return err
	}
	require.NoError(t, recv(sqs.ReceiveMessageInput{MaxNumberOfMessages: 10, VisibilityTimeout: 43200}), "10 messages, 12 hours")
	c.refused(t, LimitReceive, "WaitTimeSeconds 21", recv(sqs.ReceiveMessageInput{WaitTimeSeconds: 21}))
	c.refused(t, LimitReceive, "WaitTimeSeconds -1", recv(sqs.ReceiveMessageInput{WaitTimeSeconds: -1}))
	c.refused(t, LimitReceive, "VisibilityTimeout 43201", recv(sqs.ReceiveMessageInput{VisibilityTimeout: 43201}))
	c.refused(t, LimitReceive, "MaxNumberOfMessages 11", recv(sqs.ReceiveMessageInput{MaxNumberOfMessages: 11}))
	c.refused(t, LimitReceive, "MaxNumberOfMessages -1", recv(sqs.ReceiveMessageInput{MaxNumberOfMessages: -1}))
}

func (c *suite) limitVisibility(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	c.send(t, url, "m", "", "")
	ms := c.recvN(t, url, 1, 5*1e9)
	require.Len(t, ms, 1)
	_, err := c.Client.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 43201})
	c.refused(t, LimitVisibility, "VisibilityTimeout 43201", err)
	_, err = c.Client.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 100})
	require.NoError(t, err)
}

func (c *suite) limitDelay(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	send := func(d int32) error {
		_, err := c.Client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), DelaySeconds: d})
		return err
	}
	require.NoError(t, send(900), "15 minutes")
	c.refused(t, LimitDelay, "DelaySeconds 901", send(901))
	c.refused(t, LimitDelay, "DelaySeconds -1", send(-1))
}
