// Package sqscontract is the contract an SQS implementation must meet for the
// worker: FIFO group blocking, several messages of a group per receive in
// order, visibility changes, receive counts, redrive, deduplication, batch
// requests with per-entry failures, long polling. The same suite runs against
// the in-memory SQS and against an emulator or AWS, so that fast tests do not
// rest on behaviour the real thing lacks.
//
// Known gaps of an implementation are declared as Quirks; with a quirk set the
// suite asserts the weaker behaviour that implementation has instead. The
// in-memory SQS runs with none.
package sqscontract

import (
	"context"
	"crypto/md5" //nolint:gosec // SQS's body checksum
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// Client is the part of the SQS API the contract exercises. *sqs.Client and
// *memsqs.Server satisfy it.
type Client interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Quirks are documented deviations from AWS of the implementation under test.
type Quirks struct {
	// OneMessagePerGroup: a FIFO receive returns at most one message of each
	// message group (fauxqs). AWS returns as many of a group as it can, in order.
	OneMessagePerGroup bool
	// DeleteAcceptsInvalidReceipts: DeleteMessageBatch reports success for any
	// receipt handle, even garbage (fauxqs). AWS fails such entries.
	DeleteAcceptsInvalidReceipts bool
	// DedupScopeIgnored: DeduplicationScope=messageGroup is stored but dedup
	// stays queue-wide (fauxqs). On AWS the same id in two groups is two messages.
	DedupScopeIgnored bool
	// AttemptIDIgnored: a FIFO receive retried with the same
	// ReceiveRequestAttemptId is a fresh receive (fauxqs). On AWS it
	// returns the first attempt's messages and receipt handles for five
	// minutes, while none of them was deleted or had its visibility changed.
	AttemptIDIgnored bool
	// Unenforced names the limits (Limit* constants) the implementation
	// accepts past AWS's documented value; their cases then assert that it
	// does accept (so a declaration goes stale loudly) instead of the
	// refusal AWS makes.
	Unenforced []Limit
}

// Limit names an SQS limit with a contract case (docs/DESIGN.md lists each, under Limits).
type Limit string

// The limits the contract checks, each at the documented value and one past.
const (
	// LimitMessageSize: body plus each attribute's name, type and value at
	// most the queue's MaximumMessageSize (API_SendMessage, MessageBody;
	// API_SetQueueAttributes, MaximumMessageSize).
	LimitMessageSize Limit = "MessageSize"
	// LimitBatchSize: a SendMessageBatch's entries at most 1,048,576 bytes
	// together, else BatchRequestTooLong (API_SendMessageBatch).
	LimitBatchSize Limit = "BatchSize"
	// LimitBatchEntries: at most 10 entries, else TooManyEntriesInBatchRequest.
	LimitBatchEntries Limit = "BatchEntries"
	// LimitBatchEntryID: entry ids distinct, of alphanumerics, hyphens and
	// underscores (SendMessageBatchRequestEntry.Id).
	LimitBatchEntryID Limit = "BatchEntryID"
	// LimitBatchEntryIDLength: entry ids up to 80 characters (ditto).
	LimitBatchEntryIDLength Limit = "BatchEntryIDLength"
	// LimitAttributes: at most 10 message attributes (SendMessage,
	// MessageAttributes).
	LimitAttributes Limit = "Attributes"
	// LimitAttributeName: names up to 256 of A-Z a-z 0-9 _ - ., no leading,
	// trailing or successive periods, not AWS. or Amazon.; types String,
	// Number, Binary, optionally with a custom suffix (MessageAttributeValue).
	LimitAttributeName Limit = "AttributeName"
	// LimitMessageIDs: MessageGroupId and MessageDeduplicationId up to 128
	// alphanumeric and punctuation characters (SendMessage).
	LimitMessageIDs Limit = "MessageIDs"
	// LimitReceive: WaitTimeSeconds 0 to 20, VisibilityTimeout 0 to 43,200,
	// MaxNumberOfMessages 1 to 10 (API_ReceiveMessage).
	LimitReceive Limit = "Receive"
	// LimitVisibility: ChangeMessageVisibility's VisibilityTimeout 0 to 43,200
	// (API_ChangeMessageVisibility).
	LimitVisibility Limit = "Visibility"
	// LimitDelay: DelaySeconds 0 to 900 (SendMessage, DelaySeconds).
	LimitDelay Limit = "Delay"
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
	Client Client
	// NewQueue creates a throwaway queue with VisibilityTimeout 30 unless
	// attrs say otherwise, plus a dead-letter queue with maxReceiveCount when
	// maxReceive > 0 (testenv.NewQueue and memsqs.NewQueue do this).
	NewQueue func(t testing.TB, fifo bool, attrs map[string]string, maxReceive int) (url, dlqURL string)
	Quirks   Quirks
}

// Run runs the contract against target. The subtests run in parallel and
// take a few seconds of wall time (visibility timeouts are whole seconds).
func Run(t *testing.T, target Target) {
	c := &suite{Target: target}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"FIFO/GroupBlocksWhileInFlight", c.fifoGroupBlocks},
		{"FIFO/SeveralOfOneGroupInOrder", c.fifoSeveralInOrder},
		{"FIFO/HandBackKeepsOrder", c.fifoHandBackKeepsOrder},
		{"FIFO/ExpiryKeepsOrder", c.fifoExpiryKeepsOrder},
		{"FIFO/BatchSendKeepsOrder", c.fifoBatchSendOrder},
		{"Visibility/ZeroMakesVisibleStandard", func(t *testing.T) { c.visibilityZero(t, false) }},
		{"Visibility/ZeroMakesVisibleFIFO", func(t *testing.T) { c.visibilityZero(t, true) }},
		{"Visibility/LongerKeepsHidden", c.visibilityLonger},
		{"Visibility/ExpiryRedelivers", c.visibilityExpiry},
		{"Redrive/FIFO", func(t *testing.T) { c.redrive(t, true) }},
		{"Redrive/Standard", func(t *testing.T) { c.redrive(t, false) }},
		{"Dedup/ExplicitID", c.dedupExplicit},
		{"Dedup/ContentBased", c.dedupContent},
		{"Dedup/ScopeMessageGroup", c.dedupScopeGroup},
		{"Batch/DeleteWithPerEntryFailures", c.batchDelete},
		{"Batch/ChangeVisibilityWithPerEntryFailures", c.batchChange},
		{"Batch/RequestErrors", c.batchRequestErrors},
		{"Attributes/SystemAndMessage", c.attributes},
		{"Attributes/Queue", c.queueAttributes},
		{"LongPoll/WakesOnSend", c.longPollWakes},
		{"LongPoll/HonoursWaitTime", c.longPollWaitTime},
		{"LongPoll/HonoursContext", c.longPollContext},
		{"LongPoll/CancelledPollStillTakesMessages", c.longPollOrphans},
		{"Receive/MaxNumberOfMessages", c.maxNumber},
		{"Receive/AttemptIDRetried", c.attemptID},
		{"Errors/QueueDoesNotExist", c.noQueue},
		{"Limits/MessageSize", c.limitMessageSize},
		{"Limits/BatchSize", c.limitBatchSize},
		{"Limits/BatchEntries", c.limitBatchEntries},
		{"Limits/BatchEntryID", c.limitBatchEntryID},
		{"Limits/Attributes", c.limitAttributes},
		{"Limits/AttributeName", c.limitAttributeName},
		{"Limits/MessageIDs", c.limitMessageIDs},
		{"Limits/Receive", c.limitReceive},
		{"Limits/Visibility", c.limitVisibility},
		{"Limits/Delay", c.limitDelay},
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

func id(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(uniq.Add(1), 10)
}

func (c *suite) send(t testing.TB, url, body, group, dedup string) *sqs.SendMessageOutput {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}
	if group != "" {
		in.MessageGroupId = &group
	}
	if dedup != "" {
		in.MessageDeduplicationId = &dedup
	}
	out, err := c.Client.SendMessage(context.Background(), in)
	require.NoError(t, err)
	return out
}

// sendFIFO sends bodies to group with unique dedup ids, in order.
func (c *suite) sendFIFO(t testing.TB, url, group string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		c.send(t, url, b, group, id("d"))
	}
}

func (c *suite) recv(t testing.TB, url string, maxN, wait int32) []types.Message {
	t.Helper()
	out, err := c.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: maxN, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	require.NoError(t, err)
	return out.Messages
}

// recvN receives until n messages arrived or timeout passed, without
// deleting them.
func (c *suite) recvN(t testing.TB, url string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, c.recv(t, url, int32(min(10, n-len(got))), 1)...)
	}
	return got
}

func (c *suite) del(t testing.TB, url string, m types.Message) {
	t.Helper()
	_, err := c.Client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
	require.NoError(t, err)
}

func (c *suite) setVis(t testing.TB, url string, m types.Message, secs int32) {
	t.Helper()
	_, err := c.Client.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: secs})
	require.NoError(t, err)
}

func bodies(ms []types.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = aws.ToString(m.Body)
	}
	return out
}

func count(m types.Message) int {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return n
}

func groupOf(m types.Message) string {
	return m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
}

func (c *suite) fifoGroupBlocks(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	c.sendFIFO(t, url, "A", "a1", "a2")
	c.sendFIFO(t, url, "B", "b1")

	first := c.recv(t, url, 1, 1)
	require.Equal(t, []string{"a1"}, bodies(first), "the oldest message comes first")

	// While a1 is in flight nothing more of group A is handed out, but B is.
	others := c.recvN(t, url, 1, 5*time.Second)
	require.Equal(t, []string{"b1"}, bodies(others))
	others = append(others, c.recv(t, url, 10, 1)...)
	require.Equal(t, []string{"b1"}, bodies(others), "group A is blocked while a1 is in flight")
	c.del(t, url, others[0])

	c.del(t, url, first[0])
	next := c.recvN(t, url, 1, 5*time.Second)
	require.Equal(t, []string{"a2"}, bodies(next), "deleting a1 unblocks group A")
}

func (c *suite) fifoSeveralInOrder(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	want := []string{"g1", "g2", "g3", "g4", "g5", "g6"}
	c.sendFIFO(t, url, "G", want...)

	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		ms := c.recv(t, url, 10, 1)
		if len(ms) == 0 {
			continue
		}
		if len(got) == 0 && !c.Quirks.OneMessagePerGroup {
			require.Equal(t, want, bodies(ms), "one receive returns all of a group's available messages, in order")
		}
		for _, m := range ms {
			require.Equal(t, "G", groupOf(m))
			got = append(got, aws.ToString(m.Body))
			c.del(t, url, m)
		}
	}
	require.Equal(t, want, got, "a group's messages arrive in order")
}

func (c *suite) fifoHandBackKeepsOrder(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	c.sendFIFO(t, url, "A", "a1", "a2")
	first := c.recv(t, url, 1, 1)
	require.Equal(t, []string{"a1"}, bodies(first))
	c.setVis(t, url, first[0], 0)

	again := c.recvN(t, url, 1, 5*time.Second)
	require.NotEmpty(t, again)
	require.Equal(t, "a1", aws.ToString(again[0].Body), "a handed-back message comes before the rest of its group")
	require.Equal(t, 2, count(again[0]))
	require.NotEqual(t, aws.ToString(first[0].ReceiptHandle), aws.ToString(again[0].ReceiptHandle), "each receive has its own receipt handle")
}

func (c *suite) fifoExpiryKeepsOrder(t *testing.T) {
	url, _ := c.NewQueue(t, true, map[string]string{"VisibilityTimeout": "1"}, 0)
	c.sendFIFO(t, url, "A", "a1", "a2")
	first := c.recv(t, url, 1, 1)
	require.Equal(t, []string{"a1"}, bodies(first))
	again := c.recvN(t, url, 1, 6*time.Second)
	require.NotEmpty(t, again)
	require.Equal(t, "a1", aws.ToString(again[0].Body), "after its visibility timeout a1 comes again before a2")
	require.Equal(t, 2, count(again[0]))
}

func (c *suite) fifoBatchSendOrder(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	var entries []types.SendMessageBatchRequestEntry
	var want []string
	for i := range 10 {
		b := "m" + strconv.Itoa(i)
		want = append(want, b)
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String("e" + strconv.Itoa(i)), MessageBody: aws.String(b),
			MessageGroupId: aws.String("G"), MessageDeduplicationId: aws.String(id("d")),
		})
	}
	out, err := c.Client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	require.NoError(t, err)
	require.Len(t, out.Successful, 10)
	require.Empty(t, out.Failed)

	var got []string
	var lastSeq string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		for _, m := range c.recv(t, url, 10, 1) {
			seq := m.Attributes[string(types.MessageSystemAttributeNameSequenceNumber)]
			require.True(t, lastSeq == "" || seqLess(lastSeq, seq), "sequence numbers increase: %s then %s", lastSeq, seq)
			lastSeq = seq
			got = append(got, aws.ToString(m.Body))
			c.del(t, url, m)
		}
	}
	require.Equal(t, want, got)
}

func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func (c *suite) visibilityZero(t *testing.T, fifo bool) {
	url, _ := c.NewQueue(t, fifo, nil, 0)
	if fifo {
		c.sendFIFO(t, url, "A", "m")
	} else {
		c.send(t, url, "m", "", "")
	}
	for want := 1; want <= 3; want++ {
		ms := c.recvN(t, url, 1, 5*time.Second)
		require.Len(t, ms, 1, "receive %d", want)
		require.Equal(t, want, count(ms[0]), "ApproximateReceiveCount increments with every receive")
		c.setVis(t, url, ms[0], 0)
	}
}

func (c *suite) visibilityLonger(t *testing.T) {
	url, _ := c.NewQueue(t, false, map[string]string{"VisibilityTimeout": "1"}, 0)
	c.send(t, url, "m", "", "")
	ms := c.recvN(t, url, 1, 5*time.Second)
	require.Len(t, ms, 1)
	start := time.Now()
	c.setVis(t, url, ms[0], 4)

	// Whenever the message is received again, the new timeout must have run
	// out: a check that holds however long a starved machine sleeps.
	time.Sleep(1200 * time.Millisecond) // past the queue's 1 s timeout
	again := c.recv(t, url, 10, 0)
	if len(again) == 0 {
		again = c.recvN(t, url, 1, 10*time.Second)
	}
	require.Len(t, again, 1)
	require.GreaterOrEqual(t, time.Since(start), 3900*time.Millisecond,
		"a longer visibility timeout keeps the message hidden: visible again only after the new timeout")
	require.Equal(t, 2, count(again[0]))
}

func (c *suite) visibilityExpiry(t *testing.T) {
	url, _ := c.NewQueue(t, false, map[string]string{"VisibilityTimeout": "1"}, 0)
	c.send(t, url, "m", "", "")
	ms := c.recvN(t, url, 1, 5*time.Second)
	require.Len(t, ms, 1)
	start := time.Now()
	// One long poll: it must return once the visibility timeout has passed.
	again := c.recv(t, url, 1, 5)
	require.Len(t, again, 1, "a long poll returns the message when its visibility timeout ends")
	require.Less(t, time.Since(start), 4*time.Second)
	require.GreaterOrEqual(t, time.Since(start), 700*time.Millisecond)
	require.Equal(t, 2, count(again[0]))
}

func (c *suite) redrive(t *testing.T, fifo bool) {
	url, dlq := c.NewQueue(t, fifo, nil, 2)
	var sent *sqs.SendMessageOutput
	dedup := id("dedup")
	if fifo {
		sent = c.send(t, url, "poison", "A", dedup)
		c.sendFIFO(t, url, "A", "next")
	} else {
		sent = c.send(t, url, "poison", "", "")
	}
	for want := 1; want <= 2; want++ {
		ms := c.recvN(t, url, 1, 5*time.Second)
		require.Len(t, ms, 1)
		require.Equal(t, "poison", aws.ToString(ms[0].Body))
		require.Equal(t, want, count(ms[0]))
		c.setVis(t, url, ms[0], 0)
	}
	// The receive after maxReceiveCount moves the message to the DLQ.
	rest := c.recv(t, url, 10, 0)
	if fifo {
		require.Equal(t, []string{"next"}, bodies(rest), "the group goes on without the dead-lettered message")
	} else {
		require.Empty(t, rest)
	}
	dead := c.recvN(t, dlq, 1, 5*time.Second)
	require.Len(t, dead, 1, "the message is in the dead-letter queue")
	m := dead[0]
	require.Equal(t, "poison", aws.ToString(m.Body))
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(m.MessageId), "redrive keeps the message id")
	if fifo {
		require.Equal(t, "A", groupOf(m), "redrive keeps the group")
		require.Equal(t, dedup, m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)], "redrive keeps the deduplication id")
	}
}

// stored is how many messages the queue holds, visible or in flight.
func (c *suite) stored(t testing.TB, url string) int {
	t.Helper()
	a := c.attrs(t, url)
	n, _ := strconv.Atoi(a["ApproximateNumberOfMessages"])
	nv, _ := strconv.Atoi(a["ApproximateNumberOfMessagesNotVisible"])
	return n + nv
}

func (c *suite) dedupExplicit(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	d := id("d")
	first := c.send(t, url, "one", "A", d)
	require.NotEmpty(t, aws.ToString(first.SequenceNumber))
	c.send(t, url, "two", "B", d) // same id, within 5 minutes: dropped, in any group
	require.Equal(t, 1, c.stored(t, url), "a resend with the same deduplication id is dropped")
	ms := c.recvN(t, url, 1, 5*time.Second)
	require.Equal(t, []string{"one"}, bodies(ms))
	require.Equal(t, d, ms[0].Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)])
	c.del(t, url, ms[0])

	c.send(t, url, "three", "A", d)
	require.Equal(t, 0, c.stored(t, url), "a resend within the window is dropped even after the delete")
}

func (c *suite) dedupContent(t *testing.T) {
	url, _ := c.NewQueue(t, true, map[string]string{"ContentBasedDeduplication": "true"}, 0)
	c.send(t, url, "x", "A", "")
	c.send(t, url, "x", "B", "")
	c.send(t, url, "y", "A", "")
	require.Equal(t, 2, c.stored(t, url), "the same body is the same message")
	ms := c.recvN(t, url, 1, 5*time.Second)
	require.Equal(t, []string{"x"}, bodies(ms)[:1])
	require.NotEmpty(t, ms[0].Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)], "content-based dedup ids are reported")
}

func (c *suite) dedupScopeGroup(t *testing.T) {
	url, _ := c.NewQueue(t, true, map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}, 0)
	d := id("d")
	c.send(t, url, "a", "A", d)
	c.send(t, url, "b", "B", d)
	c.send(t, url, "a-again", "A", d)
	if c.Quirks.DedupScopeIgnored {
		require.Equal(t, 1, c.stored(t, url))
		return
	}
	require.Equal(t, 2, c.stored(t, url), "with messageGroup scope the same id in two groups is two messages")
	ms := c.recvN(t, url, 2, 5*time.Second)
	require.ElementsMatch(t, []string{"a", "b"}, bodies(ms))
}

func (c *suite) batchDelete(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	for i := range 3 {
		c.send(t, url, "m"+strconv.Itoa(i), "", "")
	}
	ms := c.recvN(t, url, 3, 5*time.Second)
	require.Len(t, ms, 3)
	entries := []types.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-receipt-handle")}}
	for i, m := range ms {
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	out, err := c.Client.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
	require.NoError(t, err, "per-entry failures do not fail the request")
	ok := map[string]bool{}
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	require.True(t, ok["e0"] && ok["e1"] && ok["e2"], "valid entries succeed: %v", ok)
	if !c.Quirks.DeleteAcceptsInvalidReceipts {
		require.Len(t, out.Failed, 1)
		require.Equal(t, "bad", aws.ToString(out.Failed[0].Id))
		require.True(t, out.Failed[0].SenderFault)
		require.Equal(t, "ReceiptHandleIsInvalid", aws.ToString(out.Failed[0].Code))
	}
	a := c.attrs(t, url)
	require.Equal(t, "0", a["ApproximateNumberOfMessages"])
	require.Equal(t, "0", a["ApproximateNumberOfMessagesNotVisible"])
}

func (c *suite) batchChange(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	c.send(t, url, "keep", "", "")
	c.send(t, url, "gone", "", "")
	ms := c.recvN(t, url, 2, 5*time.Second)
	require.Len(t, ms, 2)
	keep, gone := ms[0], ms[1]
	if aws.ToString(keep.Body) != "keep" {
		keep, gone = gone, keep
	}
	c.del(t, url, gone)
	out, err := c.Client.ChangeMessageVisibilityBatch(context.Background(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("keep"), ReceiptHandle: keep.ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-receipt-handle"), VisibilityTimeout: 0},
		{Id: aws.String("gone"), ReceiptHandle: gone.ReceiptHandle, VisibilityTimeout: 0},
	}})
	require.NoError(t, err, "per-entry failures do not fail the request")
	require.Len(t, out.Successful, 1)
	require.Equal(t, "keep", aws.ToString(out.Successful[0].Id))
	failed := map[string]types.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	require.Len(t, failed, 2)
	require.True(t, failed["bad"].SenderFault)
	require.True(t, failed["gone"].SenderFault, "a deleted message's visibility cannot change")
	again := c.recvN(t, url, 1, 5*time.Second)
	require.Equal(t, []string{"keep"}, bodies(again))
}

func (c *suite) batchRequestErrors(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	ctx := context.Background()
	_, err := c.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{}})
	var empty *types.EmptyBatchRequest
	require.ErrorAs(t, err, &empty)

	var eleven []types.ChangeMessageVisibilityBatchRequestEntry
	for i := range 11 {
		eleven = append(eleven, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String("e" + strconv.Itoa(i)), ReceiptHandle: aws.String("x")})
	}
	_, err = c.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: eleven})
	var tooMany *types.TooManyEntriesInBatchRequest
	require.ErrorAs(t, err, &tooMany)

	_, err = c.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("same"), ReceiptHandle: aws.String("x")}, {Id: aws.String("same"), ReceiptHandle: aws.String("y")},
	}})
	var dup *types.BatchEntryIdsNotDistinct
	require.ErrorAs(t, err, &dup)
}

func (c *suite) attrs(t testing.TB, url string) map[string]string {
	t.Helper()
	out, err := c.Client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	return out.Attributes
}

func (c *suite) attributes(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	before := time.Now().Add(-5 * time.Second)
	body := `{"account":"a1","amount_cents":250}`
	d := id("d")
	sent, err := c.Client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: &url, MessageBody: &body, MessageGroupId: aws.String("G"), MessageDeduplicationId: &d,
		MessageAttributes: map[string]types.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String("t1")},
			"n":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
			"raw":    {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
		},
	})
	require.NoError(t, err)
	after := time.Now().Add(5 * time.Second)

	ms := c.recvN(t, url, 1, 5*time.Second)
	require.Len(t, ms, 1)
	m := ms[0]
	sum := md5.Sum([]byte(body)) //nolint:gosec // SQS's checksum
	require.Equal(t, hex.EncodeToString(sum[:]), aws.ToString(m.MD5OfBody))
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(m.MessageId))
	a := m.Attributes
	require.Equal(t, "G", a["MessageGroupId"])
	require.Equal(t, d, a["MessageDeduplicationId"])
	require.Equal(t, aws.ToString(sent.SequenceNumber), a["SequenceNumber"])
	require.Equal(t, "1", a["ApproximateReceiveCount"])
	ms64, err := strconv.ParseInt(a["SentTimestamp"], 10, 64)
	require.NoError(t, err)
	require.True(t, ms64 >= before.UnixMilli() && ms64 <= after.UnixMilli(), "SentTimestamp %d is epoch milliseconds", ms64)
	require.NotEmpty(t, a["ApproximateFirstReceiveTimestamp"])
	require.Equal(t, "t1", aws.ToString(m.MessageAttributes["tenant"].StringValue))
	require.Equal(t, "Number", aws.ToString(m.MessageAttributes["n"].DataType))
	require.Equal(t, "42", aws.ToString(m.MessageAttributes["n"].StringValue))
	require.Equal(t, []byte{0, 1, 2}, m.MessageAttributes["raw"].BinaryValue)

	// Only the named attributes when asked for some.
	c.setVis(t, url, m, 0)
	out, err := c.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, WaitTimeSeconds: 2, MessageAttributeNames: []string{"tenant"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	require.Equal(t, []string{"tenant"}, keys(out.Messages[0].MessageAttributes))
	require.Equal(t, map[string]string{"ApproximateReceiveCount": "2"}, out.Messages[0].Attributes)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (c *suite) queueAttributes(t *testing.T) {
	url, dlq := c.NewQueue(t, true, map[string]string{"VisibilityTimeout": "45"}, 3)
	a := c.attrs(t, url)
	require.Equal(t, "true", a["FifoQueue"])
	require.Equal(t, "45", a["VisibilityTimeout"])
	require.NotEmpty(t, a["QueueArn"])
	require.Contains(t, a["RedrivePolicy"], "maxReceiveCount")
	require.Contains(t, a["RedrivePolicy"], c.attrs(t, dlq)["QueueArn"])
	require.Equal(t, "queue", a["DeduplicationScope"])

	c.sendFIFO(t, url, "A", "a1", "a2")
	c.recvN(t, url, 1, 5*time.Second)
	a = c.attrs(t, url)
	n, _ := strconv.Atoi(a["ApproximateNumberOfMessages"])
	nv, _ := strconv.Atoi(a["ApproximateNumberOfMessagesNotVisible"])
	require.Equal(t, 2, n+nv)
	require.GreaterOrEqual(t, nv, 1)
}

func (c *suite) longPollWakes(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	got := make(chan []types.Message, 1)
	start := time.Now()
	go func() {
		out, err := c.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 10, MaxNumberOfMessages: 10})
		if err != nil {
			got <- nil
			return
		}
		got <- out.Messages
	}()
	time.Sleep(300 * time.Millisecond)
	c.send(t, url, "wake", "", "")
	select {
	case ms := <-got:
		require.Equal(t, []string{"wake"}, bodies(ms))
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(12 * time.Second):
		t.Fatal("long poll did not return")
	}
}

func (c *suite) longPollWaitTime(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	start := time.Now()
	require.Empty(t, c.recv(t, url, 10, 1))
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 900*time.Millisecond, "an empty long poll waits WaitTimeSeconds")
	require.Less(t, took, 5*time.Second)
}

func (c *suite) longPollContext(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
	require.Error(t, err, "a cancelled long poll returns an error")
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "error wraps the context's: %v", err)
	require.Less(t, time.Since(start), 5*time.Second)
}

// longPollOrphans pins a trap: cancelling a long poll ends the call on the
// client, but the service keeps the poll until its wait ends and hands it
// messages that then nobody gets; they reappear only after their visibility
// timeout (aws/aws-sdk-go-v2#2068, aws/aws-sdk-java-v2#1395).
func (c *suite) longPollOrphans(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5})
	require.Error(t, err)
	c.send(t, url, "orphan", "", "")
	deadline := time.Now().Add(3 * time.Second)
	for {
		a := c.attrs(t, url)
		if a["ApproximateNumberOfMessagesNotVisible"] == "1" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the cancelled poll took the message: %v", a)
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, c.recv(t, url, 10, 0), "it is in flight for nobody")
}

func (c *suite) maxNumber(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	for i := range 12 {
		c.send(t, url, fmt.Sprint(i), "", "")
	}
	ms := c.recv(t, url, 5, 1)
	require.NotEmpty(t, ms)
	require.LessOrEqual(t, len(ms), 5)
	_, err := c.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
	require.Error(t, err, "at most 10 messages per receive")
}

func (c *suite) noQueue(t *testing.T) {
	url, _ := c.NewQueue(t, false, nil, 0)
	missing := url + "-missing"
	_, err := c.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &missing})
	var nq *types.QueueDoesNotExist
	require.ErrorAs(t, err, &nq)
	_, err = c.Client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &missing, MessageBody: aws.String("x")})
	require.ErrorAs(t, err, &nq)
}

// attemptID: a FIFO receive retried with its ReceiveRequestAttemptId
// returns the same messages and receipt handles (what a stopping worker
// asks back from a poll it cancelled); once one of them had its visibility
// changed, the retry is refused as not retryable.
func (c *suite) attemptID(t *testing.T) {
	url, _ := c.NewQueue(t, true, nil, 0)
	c.sendFIFO(t, url, "A", "a1", "a2")
	in := &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, ReceiveRequestAttemptId: aws.String(id("attempt"))}
	first, err := c.Client.ReceiveMessage(context.Background(), in)
	require.NoError(t, err)
	require.NotEmpty(t, first.Messages)
	retry, err := c.Client.ReceiveMessage(context.Background(), in)
	require.NoError(t, err)
	if c.Quirks.AttemptIDIgnored {
		// Declared: the retry is a fresh receive, which finds the group
		// held. Asserted, so that the declaration goes stale loudly.
		require.Empty(t, retry.Messages, "AttemptIDIgnored is declared: a retried attempt id must act as a fresh receive")
		t.Skip("AttemptIDIgnored: this implementation treats a retried ReceiveRequestAttemptId as a fresh receive")
	}
	require.Len(t, retry.Messages, len(first.Messages), "a retried attempt id returns the first attempt's messages")
	for i, m := range first.Messages {
		require.Equal(t, aws.ToString(m.MessageId), aws.ToString(retry.Messages[i].MessageId))
		require.Equal(t, aws.ToString(m.ReceiptHandle), aws.ToString(retry.Messages[i].ReceiptHandle))
	}
	c.setVis(t, url, first.Messages[0], 0)
	_, err = c.Client.ReceiveMessage(context.Background(), in)
	var api smithy.APIError
	require.ErrorAs(t, err, &api, "a retry after a visibility change is refused")
	require.Equal(t, "InvalidParameterValue", strings.TrimPrefix(api.ErrorCode(), "AWS.SimpleQueueService."))
}
