package memsqs_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

type bundle struct {
	s     *memsqs.Server
	clock *memsqs.ManualClock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clock := memsqs.NewManualClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	return &bundle{s: memsqs.New(memsqs.WithClock(clock)), clock: clock}
}

func (b *bundle) send(t *testing.T, url, body, group, dedup string) *sqs.SendMessageOutput {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}
	if group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = &group, &dedup
	}
	out, err := b.s.SendMessage(context.Background(), in)
	require.NoError(t, err)
	return out
}

func (b *bundle) recv(t *testing.T, url string, maxN int32) []types.Message {
	t.Helper()
	out, err := b.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: maxN,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	require.NoError(t, err)
	return out.Messages
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestDedupWindowEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, true, nil, 0)
	first := b.send(t, url, "a", "G", "d1")
	b.clock.Advance(4*time.Minute + 59*time.Second)
	again := b.send(t, url, "a", "G", "d1")
	require.Equal(t, aws.ToString(first.MessageId), aws.ToString(again.MessageId), "a duplicate reports the original")
	b.clock.Advance(2 * time.Second)
	later := b.send(t, url, "a", "G", "d1")
	require.NotEqual(t, aws.ToString(first.MessageId), aws.ToString(later.MessageId), "after 5 minutes a resend is a new message")
	ms := b.recv(t, url, 10)
	require.Len(t, ms, 2)
}

func TestFIFOExpiredReceiptIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, true, map[string]string{"VisibilityTimeout": "10"}, 0)
	b.send(t, url, "a", "G", "d1")
	m := b.recv(t, url, 1)[0]
	b.clock.Advance(11 * time.Second)
	_, err := b.s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
	var inv *types.ReceiptHandleIsInvalid
	require.ErrorAs(t, err, &inv, "FIFO: a receipt handle whose visibility timeout passed has expired")
	_, err = b.s.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 5})
	var nif *types.MessageNotInflight
	require.ErrorAs(t, err, &nif)

	again := b.recv(t, url, 1)[0]
	require.Equal(t, "2", again.Attributes["ApproximateReceiveCount"])
	_, err = b.s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: again.ReceiptHandle})
	require.NoError(t, err)
	_, err = b.s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: again.ReceiptHandle})
	require.NoError(t, err, "deleting a deleted message succeeds")
}

func TestStandardStaleReceiptDoesNotDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, map[string]string{"VisibilityTimeout": "10"}, 0)
	b.send(t, url, "a", "", "")
	old := b.recv(t, url, 1)[0]
	b.clock.Advance(11 * time.Second)
	cur := b.recv(t, url, 1)[0]
	_, err := b.s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: old.ReceiptHandle})
	require.NoError(t, err, "a stale handle succeeds on a standard queue")
	b.clock.Advance(11 * time.Second)
	require.Len(t, b.recv(t, url, 1), 1, "but the message was not deleted")
	_ = cur
}

func TestVisibilityCappedAt12HoursFromReceive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, nil, 0)
	b.send(t, url, "a", "", "")
	m := b.recv(t, url, 1)[0]
	change := func(secs int32) error {
		_, err := b.s.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: secs})
		return err
	}
	require.NoError(t, change(12*3600))
	b.clock.Advance(time.Hour)
	require.NoError(t, change(11*3600))
	require.Equal(t, "InvalidParameterValue", code(change(11*3600+1)))
}

func TestReceiveAttemptIDReturnsSameMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, true, nil, 0)
	b.send(t, url, "a1", "A", "1")
	b.send(t, url, "a2", "A", "2")
	b.send(t, url, "b1", "B", "3")
	recv := func(attempt string) []types.Message {
		out, err := b.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 2, ReceiveRequestAttemptId: aws.String(attempt)})
		require.NoError(t, err)
		return out.Messages
	}
	first := recv("x")
	require.Len(t, first, 2)
	retry := recv("x")
	require.Equal(t, first, retry, "a retried receive returns the same messages and receipt handles")
	other := recv("y")
	require.Len(t, other, 1)
	require.Equal(t, "b1", aws.ToString(other[0].Body))
}

// TestReceiveAttemptIDIsRefusedOnceModified: AWS lets a receive be retried
// by its attempt id only while none of its messages was deleted or had its
// visibility changed; after that the retry is refused as not retryable.
func TestReceiveAttemptIDIsRefusedOnceModified(t *testing.T) {
	t.Parallel()
	for _, modify := range []string{"visibility", "delete"} {
		t.Run(modify, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			url, _ := memsqs.NewQueue(t, b.s, true, nil, 0)
			b.send(t, url, "a1", "A", "1")
			b.send(t, url, "a2", "A", "2")
			in := &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 2, ReceiveRequestAttemptId: aws.String("x")}
			out, err := b.s.ReceiveMessage(context.Background(), in)
			require.NoError(t, err)
			require.Len(t, out.Messages, 2)
			h := out.Messages[1].ReceiptHandle
			if modify == "delete" {
				_, err = b.s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: h})
			} else {
				_, err = b.s.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: h, VisibilityTimeout: 60})
			}
			require.NoError(t, err)
			_, err = b.s.ReceiveMessage(context.Background(), in)
			require.Equal(t, "InvalidParameterValue", code(err))
			require.ErrorContains(t, err, "not retryable")
		})
	}
}

func TestLongPollWakesOnVisibilityExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, map[string]string{"VisibilityTimeout": "5"}, 0)
	b.send(t, url, "a", "", "")
	b.recv(t, url, 1)

	got := make(chan []types.Message)
	go func() {
		out, err := b.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		if err != nil {
			got <- nil
			return
		}
		got <- out.Messages
	}()
	waitParked(t, b.clock, 1)
	b.clock.Advance(4 * time.Second)
	select {
	case <-got:
		t.Fatal("returned before the visibility timeout ended")
	default:
	}
	waitParked(t, b.clock, 1)
	b.clock.Advance(time.Second)
	ms := <-got
	require.Len(t, ms, 1)
}

func TestLongPollTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, nil, 0)
	got := make(chan int)
	go func() {
		out, err := b.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		if err != nil {
			got <- -1
			return
		}
		got <- len(out.Messages)
	}()
	waitParked(t, b.clock, 1)
	b.clock.Advance(20 * time.Second)
	require.Equal(t, 0, <-got)
}

func TestDeleteQueueEndsLongPolls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, nil, 0)
	errc := make(chan error)
	go func() {
		_, err := b.s.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		errc <- err
	}()
	waitParked(t, b.clock, 1)
	_, err := b.s.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url})
	require.NoError(t, err)
	var nq *types.QueueDoesNotExist
	require.ErrorAs(t, <-errc, &nq)
}

func TestDelays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, false, map[string]string{"DelaySeconds": "3"}, 0)
	b.send(t, url, "queue-delay", "", "")
	_, err := b.s.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("own-delay"), DelaySeconds: 1})
	require.NoError(t, err)
	require.Empty(t, b.recv(t, url, 10))
	b.clock.Advance(time.Second)
	require.Equal(t, "own-delay", aws.ToString(b.recv(t, url, 10)[0].Body))
	b.clock.Advance(2 * time.Second)
	require.Equal(t, "queue-delay", aws.ToString(b.recv(t, url, 10)[0].Body))
}

func TestFIFOHandsOutGroupsOldestFirstAndFillsFromOneGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url, _ := memsqs.NewQueue(t, b.s, true, nil, 0)
	b.send(t, url, "b1", "B", "1")
	b.send(t, url, "a1", "A", "2")
	b.send(t, url, "b2", "B", "3")
	b.send(t, url, "a2", "A", "4")
	ms := b.recv(t, url, 3)
	var got []string
	for _, m := range ms {
		got = append(got, aws.ToString(m.Body))
	}
	require.Equal(t, []string{"b1", "b2", "a1"}, got)
	require.Empty(t, b.recv(t, url, 10), "both groups are in flight")
}

func TestSendValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fifo, _ := memsqs.NewQueue(t, b.s, true, nil, 0)
	std, _ := memsqs.NewQueue(t, b.s, false, nil, 0)
	ctx := context.Background()
	for name, in := range map[string]*sqs.SendMessageInput{
		"fifo without group":        {QueueUrl: &fifo, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")},
		"fifo without dedup id":     {QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")},
		"fifo with message delay":   {QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d"), DelaySeconds: 1},
		"standard with dedup id":    {QueueUrl: &std, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")},
		"empty body":                {QueueUrl: &std, MessageBody: aws.String("")},
		"invalid character":         {QueueUrl: &std, MessageBody: aws.String("a\x00b")},
		"string attr without value": {QueueUrl: &std, MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String")}}},
	} {
		_, err := b.s.SendMessage(ctx, in)
		require.Error(t, err, name)
	}
}

func TestCreateQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a.fifo")})
	require.Error(t, err, "a .fifo name needs FifoQueue=true")
	_, err = b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	require.Error(t, err, "FIFO attributes on a standard queue")
	_, err = b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a"), Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope","maxReceiveCount":3}`}})
	require.Error(t, err, "the dead-letter queue must exist")
	out, err := b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
	require.NoError(t, err)
	again, err := b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(out.QueueUrl), aws.ToString(again.QueueUrl))
	_, err = b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("a"), Attributes: map[string]string{"VisibilityTimeout": "6"}})
	var exists *types.QueueNameExists
	require.ErrorAs(t, err, &exists)
	u, err := b.s.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("a")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(out.QueueUrl), aws.ToString(u.QueueUrl))
}

// waitParked waits until n long polls are parked on the manual clock.
func waitParked(t *testing.T, c *memsqs.ManualClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("no long poll parked")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFIFOGroupsServedOldestHeadFirst follows the group index through the
// ways a group changes place: a receive blocks it, a visibility set to 0
// and a timeout's end free it, a delete moves its head. Whatever happened,
// a receive serves the groups whose heads are oldest first.
func TestFIFOGroupsServedOldestHeadFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q, err := b.s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("o.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"}})
	require.NoError(t, err)
	url := *q.QueueUrl
	for i, m := range []struct{ body, group string }{{"a1", "A"}, {"b1", "B"}, {"c1", "C"}, {"a2", "A"}, {"d1", "D"}} {
		b.send(t, url, m.body, m.group, strconv.Itoa(i))
	}
	bodies := func(ms []types.Message) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = aws.ToString(m.Body)
		}
		return out
	}
	a1 := b.recv(t, url, 1)
	require.Equal(t, []string{"a1"}, bodies(a1))
	require.Equal(t, []string{"b1"}, bodies(b.recv(t, url, 1)), "A is blocked: the next oldest head")
	_, err = b.s.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: a1[0].ReceiptHandle})
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "a2", "c1", "d1"}, bodies(b.recv(t, url, 10)), "a1 handed back: A's head is again the oldest")
	require.Empty(t, b.recv(t, url, 10), "every group is in flight")
	b.clock.Advance(31 * time.Second)
	again := b.recv(t, url, 2)
	require.Equal(t, []string{"a1", "a2"}, bodies(again), "the timeouts ended: oldest head first, as many of its group as fit")
	for _, m := range again {
		_, err := b.s.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		require.NoError(t, err)
	}
	b.send(t, url, "a3", "A", "9")
	require.Equal(t, []string{"b1", "c1", "d1", "a3"}, bodies(b.recv(t, url, 10)), "A's new head is the youngest")
}
