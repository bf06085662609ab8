package memsqs_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// abandon starts a long poll of wait seconds and gives up on it after a
// second, as a stopping worker does.
func abandon(t *testing.T, s *memsqs.Server, in *sqs.ReceiveMessageInput) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Second); cancel() }()
	_, err := s.ReceiveMessage(ctx, in)
	require.ErrorIs(t, err, context.Canceled)
}

func inFlight(t *testing.T, s *memsqs.Server, url *string) string {
	t.Helper()
	out, err := s.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	return out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
}

// TestAbandonedPollTakesWhatComesInItsWait: SQS serves a long poll whose
// caller gave up to the end of its wait (aws/aws-sdk-go-v2#2068), so a
// message sent within that wait is taken by nobody and stays in flight for
// its visibility timeout; one sent after it is not. The poll leaves no
// goroutine behind: the bubble ends without waiting its wait out.
func TestAbandonedPollTakesWhatComesInItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memsqs.New()
		q, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: map[string]string{"VisibilityTimeout": "30"}})
		require.NoError(t, err)
		abandon(t, s, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
		time.Sleep(4 * time.Second) // 5 s into its 20 s wait
		_, err = s.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("taken")})
		require.NoError(t, err)
		out, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
		require.NoError(t, err)
		require.Empty(t, out.Messages, "the abandoned poll took the message")
		require.Equal(t, "1", inFlight(t, s, q.QueueUrl))

		time.Sleep(20 * time.Second) // past the abandoned poll's wait
		_, err = s.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("after")})
		require.NoError(t, err)
		out, err = s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
		require.NoError(t, err)
		require.Len(t, out.Messages, 1, "a message sent after the wait")
		require.Equal(t, "after", aws.ToString(out.Messages[0].Body))

		time.Sleep(10 * time.Second) // the taken one's 30 s are over
		out, err = s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
		require.NoError(t, err)
		require.Len(t, out.Messages, 1)
		require.Equal(t, "taken", aws.ToString(out.Messages[0].Body))
	})
}

// TestAbandonedPollTakesWhatTurnsVisibleInItsWait: with no call on the
// queue until after its wait, an abandoned FIFO poll still takes a
// message whose visibility ended within that wait, at that instant (the
// poll is served to the instant it would have woken), and a retry of its
// receive request attempt id returns it.
func TestAbandonedPollTakesWhatTurnsVisibleInItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memsqs.New()
		q, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q.fifo"),
			Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"}})
		require.NoError(t, err)
		_, err = s.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m"),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("m")})
		require.NoError(t, err)
		first, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 3})
		require.NoError(t, err)
		require.Len(t, first.Messages, 1)
		in := &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20, VisibilityTimeout: 60,
			ReceiveRequestAttemptId: aws.String("stopping")}
		abandon(t, s, in)            // at 1 s; the message is visible again at 3 s
		time.Sleep(40 * time.Second) // nothing touches the queue meanwhile
		require.Equal(t, "1", inFlight(t, s, q.QueueUrl), "taken at 3 s for 60 s")
		again, err := s.ReceiveMessage(ctx, in) // the same attempt id
		require.NoError(t, err)
		require.Len(t, again.Messages, 1, "the retry returns what the abandoned poll took")
		require.Equal(t, "m", aws.ToString(again.Messages[0].Body))
		require.NotEqual(t, aws.ToString(first.Messages[0].ReceiptHandle), aws.ToString(again.Messages[0].ReceiptHandle))
	})
}

// TestAbandonedPollLeavesNoGoroutine: a test that gives up on a long poll
// and ends at once (as a worker's idle stop does) ends its synctest bubble
// clean: the abandoned poll is the queue's state, not a goroutine.
func TestAbandonedPollLeavesNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memsqs.New()
		q, err := s.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("q")})
		require.NoError(t, err)
		abandon(t, s, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
	})
}
