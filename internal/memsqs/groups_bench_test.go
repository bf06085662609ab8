package memsqs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// BenchmarkFIFOReceiveGroups is a receive of ten and their delete on a FIFO
// queue whose backlog is spread over 1,000 or 100,000 groups, each holding
// two messages. The cost of one receive must not grow with the number of
// groups waiting (the sweep of issue 34 reaches 100,000 groups): compare
// the two sub-benchmarks' ns/op, measured in the same run.
func BenchmarkFIFOReceiveGroups(b *testing.B) {
	for _, groups := range []int{1_000, 100_000} {
		b.Run("groups="+strconv.Itoa(groups), func(b *testing.B) {
			ctx := context.Background()
			clock := memsqs.NewManualClock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
			s := memsqs.New(memsqs.WithClock(clock))
			q, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("b.fifo"),
				Attributes: map[string]string{"FifoQueue": "true"}})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			send := func(group int) {
				n++
				entries := []types.SendMessageBatchRequestEntry{{Id: aws.String("e"), MessageBody: aws.String("m"),
					MessageGroupId: aws.String("g" + strconv.Itoa(group)), MessageDeduplicationId: aws.String(strconv.Itoa(n))}}
				if _, err := s.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries}); err != nil {
					b.Fatal(err)
				}
			}
			for range 2 {
				for g := range groups {
					send(g)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				out, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
				if err != nil || len(out.Messages) == 0 {
					b.Fatalf("receive %d: %v, %d messages", i, err, len(out.Messages))
				}
				del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
				for j, m := range out.Messages {
					del[j] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: m.ReceiptHandle}
				}
				if _, err := s.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl, Entries: del}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for range len(out.Messages) { // keep the backlog and the groups as they were
					send(groups/2 + i%(groups/2))
				}
				b.StartTimer()
			}
		})
	}
}
