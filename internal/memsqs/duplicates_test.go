package memsqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// A standard queue with WithDuplicates delivers a copy of a message that is
// in flight, and again after the message was deleted; each copy is deleted
// by its own receipt handles only, and leaves no copy itself.
func TestStandardDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	clock := memsqs.NewManualClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	var asked []int
	s := memsqs.New(memsqs.WithClock(clock), memsqs.WithDuplicates(func(queue, body string, receive int) (time.Duration, bool) {
		asked = append(asked, receive)
		return 2 * time.Second, body == "dup"
	}))
	b := &bundle{s: s, clock: clock}
	url, _ := memsqs.NewQueue(t, s, false, map[string]string{"VisibilityTimeout": "30"}, 0)
	sent := b.send(t, url, "dup", "", "")
	b.send(t, url, "once", "", "")

	first := b.recv(t, url, 10)
	require.Len(t, first, 2, "the copy is not receivable at once")
	require.Empty(t, b.recv(t, url, 10))
	clock.Advance(2 * time.Second)
	ghost := b.recv(t, url, 10)
	require.Len(t, ghost, 1, "the copy comes while the message is still in flight")
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(ghost[0].MessageId), "the copy has the message's id")
	require.Equal(t, "1", ghost[0].Attributes["ApproximateReceiveCount"], "and a receive count of its own")
	require.NotEqual(t, aws.ToString(first[0].ReceiptHandle), aws.ToString(ghost[0].ReceiptHandle))

	// Deleting the original leaves the copy; deleting the copy removes it.
	for _, m := range first {
		_, err := s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		require.NoError(t, err)
	}
	clock.Advance(31 * time.Second)
	again := b.recv(t, url, 10)
	require.Len(t, again, 1, "the copy outlives the deleted original")
	require.Equal(t, "dup", aws.ToString(again[0].Body))
	require.Equal(t, "2", again[0].Attributes["ApproximateReceiveCount"])
	_, err := s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ghost[0].ReceiptHandle})
	require.NoError(t, err, "a stale handle of the copy succeeds and deletes nothing")
	_, err = s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: again[0].ReceiptHandle})
	require.NoError(t, err)
	clock.Advance(time.Hour)
	require.Empty(t, b.recv(t, url, 10), "the copy is gone, and left no copy of its own")
	require.Equal(t, []int{1, 1}, asked, "asked at each receive of a message, never of a copy")
}

// FIFO queues never duplicate.
func TestFIFONeverDuplicates(t *testing.T) {
	t.Parallel()
	clock := memsqs.NewManualClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	s := memsqs.New(memsqs.WithClock(clock), memsqs.WithDuplicates(func(string, string, int) (time.Duration, bool) { return time.Second, true }))
	b := &bundle{s: s, clock: clock}
	url, _ := memsqs.NewQueue(t, s, true, nil, 0)
	b.send(t, url, "a", "g", "d")
	m := b.recv(t, url, 10)
	require.Len(t, m, 1)
	_, err := s.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m[0].ReceiptHandle})
	require.NoError(t, err)
	clock.Advance(time.Hour)
	require.Empty(t, b.recv(t, url, 10))
}
