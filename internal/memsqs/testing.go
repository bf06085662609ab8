package memsqs

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var nameSeq atomic.Int64

func uniqueName() string { return "q-" + strconv.FormatInt(nameSeq.Add(1), 10) }

// NewQueue is testenv.NewQueue for a Server: it creates a queue (FIFO when
// fifo) with VisibilityTimeout 30 and attrs, plus a dead-letter queue with
// maxReceiveCount when maxReceive > 0, and deletes them when the test ends.
func NewQueue(t testing.TB, s *Server, fifo bool, attrs map[string]string, maxReceive int) (url, dlqURL string) {
	t.Helper()
	ctx := context.Background()
	name := uniqueName()
	suffix := ""
	all := map[string]string{"VisibilityTimeout": "30"}
	if fifo {
		suffix = ".fifo"
		all["FifoQueue"] = "true"
	}
	for k, v := range attrs {
		all[k] = v
	}
	if maxReceive > 0 {
		dattrs := map[string]string{}
		if fifo {
			dattrs["FifoQueue"] = "true"
		}
		out, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq" + suffix), Attributes: dattrs})
		if err != nil {
			t.Fatalf("create DLQ: %v", err)
		}
		dlqURL = aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = s.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &dlqURL}) })
		a, err := s.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlqURL, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("DLQ arn: %v", err)
		}
		all["RedrivePolicy"] = `{"deadLetterTargetArn":"` + a.Attributes["QueueArn"] + `","maxReceiveCount":"` + strconv.Itoa(maxReceive) + `"}`
	}
	out, err := s.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix), Attributes: all})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	url = aws.ToString(out.QueueUrl)
	t.Cleanup(func() { _, _ = s.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url}) })
	return url, dlqURL
}
