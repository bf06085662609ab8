package memsqs_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// TestWithIDsReplays: a server seeded alike gives the same message ids and
// receipt handles to the same calls; an unseeded one does not.
func TestWithIDsReplays(t *testing.T) {
	ids := func(s *memsqs.Server) []string {
		ctx := context.Background()
		q, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for range 3 {
			m, err := s.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, aws.ToString(m.MessageId))
		}
		r, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil || len(r.Messages) == 0 {
			t.Fatal(err, len(r.Messages))
		}
		return append(out, aws.ToString(r.Messages[0].ReceiptHandle))
	}
	a := ids(memsqs.New(memsqs.WithIDs(rand.NewPCG(1, 2))))
	b := ids(memsqs.New(memsqs.WithIDs(rand.NewPCG(1, 2))))
	c := ids(memsqs.New())
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("id %d: %s and %s from one seed", i, a[i], b[i])
		}
		if a[i] == c[i] {
			t.Fatalf("id %d: %s from crypto/rand too", i, a[i])
		}
	}
}
