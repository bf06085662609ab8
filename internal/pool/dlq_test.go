package pool

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/process"
)

// The tests of the move to the dead-letter queue run in a synctest bubble:
// the pool, its long polls and the in-memory SQS follow virtual time, and a
// test lets the pool work for a while of it, then stops it and looks.

// poisonAll fails every message permanently.
func poisonAll(context.Context, effect.Message, process.Hooks) process.Result {
	return process.Result{Action: process.Fail, Err: effect.Permanent(errors.New("bad body"))}
}

// runFor runs the pool for d of virtual time, then stops it.
func (b *testBundle) runFor(t *testing.T, d time.Duration) {
	t.Helper()
	b.start(t)
	time.Sleep(d)
	synctest.Wait()
	b.stop(t)
}

func sendWithID(t *testing.T, c SQS, url, group, dedupID, body string) {
	t.Helper()
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: &url, MessageBody: &body, MessageGroupId: &group, MessageDeduplicationId: &dedupID,
	})
	require.NoError(t, err)
}

func dlqBodies(t *testing.T, b *testBundle, url string) []string {
	t.Helper()
	var out []string
	for _, m := range b.receiveNow(t, url) {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

// TestDeadLetterCopyOfAHighThroughputQueueIsNotDropped: a queue with
// DeduplicationScope=messageGroup takes the same dedup id in two groups as
// two messages; its plain FIFO dead-letter queue dedups queue-wide. A copy
// that reused the source's dedup id was dropped there (SQS answers 200), and
// the pool then deleted the original: a lost message.
func TestDeadLetterCopyOfAHighThroughputQueueIsNotDropped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, maxReceive: 5,
			attrs: map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}})
		b.cfg.Queues[0].DLQURL = b.dlq
		b.proc.ProcessFunc = poisonAll
		sendWithID(t, b.sqs, b.url, "A", "same", "from A")
		sendWithID(t, b.sqs, b.url, "B", "same", "from B")
		b.runFor(t, 10*time.Second)

		v, nv := b.counts(t, b.url)
		require.Zero(t, v+nv, "both originals were deleted after their move")
		require.ElementsMatch(t, []string{"from A", "from B"}, dlqBodies(t, b, b.dlq), "both copies are in the DLQ")
	})
}

// TestDeadLetterCopiesFromQueuesSharingADLQ: two queues whose dedup ids
// overlap share one dead-letter queue; each copy arrives.
func TestDeadLetterCopiesFromQueuesSharingADLQ(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, maxReceive: 5})
		other, _ := memsqs.NewQueue(t, b.sqs, true, nil, 0)
		b.cfg.Queues[0].DLQURL = b.dlq
		b.cfg.Queues = append(b.cfg.Queues, Queue{URL: other, FIFO: true, Visibility: 30 * time.Second, DLQURL: b.dlq})
		b.proc.ProcessFunc = poisonAll
		sendWithID(t, b.sqs, b.url, "A", "order-1", "from the first queue")
		sendWithID(t, b.sqs, other, "A", "order-1", "from the second queue")
		b.runFor(t, 10*time.Second)

		for _, u := range []string{b.url, other} {
			v, nv := b.counts(t, u)
			require.Zero(t, v+nv)
		}
		require.ElementsMatch(t, []string{"from the first queue", "from the second queue"}, dlqBodies(t, b, b.dlq))
	})
}

// failFirstDelete fails the first DeleteMessageBatch call: the message the
// pool moved comes back after its visibility timeout and is moved again.
type failFirstDelete struct {
	SQS
	failed atomic.Bool
	sends  atomic.Int64
}

func (f *failFirstDelete) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, errors.New("connection reset")
	}
	return f.SQS.DeleteMessageBatch(ctx, in, opts...)
}

func (f *failFirstDelete) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sends.Add(1)
	return f.SQS.SendMessage(ctx, in, opts...)
}

// TestRetriedMoveLeavesOneCopy: a message moved twice (its delete after the
// first move failed) leaves one copy in the dead-letter queue: the copy's
// dedup id is stable across moves of the same message.
func TestRetriedMoveLeavesOneCopy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, maxReceive: 5,
			attrs: map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}})
		flaky := &failFirstDelete{SQS: b.sqs}
		b.cfg.Client = flaky
		b.cfg.Queues[0].DLQURL = b.dlq
		b.proc.ProcessFunc = poisonAll
		sendWithID(t, b.sqs, b.url, "A", "d1", "poison")
		b.runFor(t, 2*time.Minute) // past the visibility timeout (30 s)

		require.True(t, flaky.failed.Load())
		require.EqualValues(t, 2, flaky.sends.Load(), "moved twice")
		v, nv := b.counts(t, b.url)
		require.Zero(t, v+nv)
		require.Equal(t, []string{"poison"}, dlqBodies(t, b, b.dlq), "the second copy was dropped as a duplicate")
	})
}

// TestNoDeadLetterCopyWithoutRoomForTheKey: a message with SQS's ten message
// attributes and no idempotency-key cannot carry its dedup key; a copy
// without it would get another key when replayed, so it is not copied: the
// queue's redrive policy moves the message itself, and the log says why.
func TestNoDeadLetterCopyWithoutRoomForTheKey(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, options{fifo: true, maxReceive: 2})
		b.cfg.Queues[0].DLQURL = b.dlq
		b.proc.ProcessFunc = poisonAll
		attrs := map[string]types.MessageAttributeValue{}
		for i := range 10 {
			attrs["a"+strconv.Itoa(i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		_, err := b.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: &b.url, MessageBody: aws.String("full"), MessageGroupId: aws.String("A"),
			MessageDeduplicationId: aws.String("d-full"), MessageAttributes: attrs,
		})
		require.NoError(t, err)
		b.runFor(t, 10*time.Second)

		require.Zero(t, b.rec.sends, "no lossy copy was sent")
		dead := b.receiveNow(t, b.dlq)
		require.Len(t, dead, 1, "the redrive policy moved it")
		require.Equal(t, "d-full", dead[0].Attributes["MessageDeduplicationId"], "as it was: its dedup key (auto) survives")
		require.Contains(t, b.logs.String(), "no room for an idempotency-key attribute")
	})
}
