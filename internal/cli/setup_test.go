package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

func queueAttrs(t *testing.T, c setupSQS, name string) map[string]string {
	t.Helper()
	u, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	require.NoError(t, err)
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	require.NoError(t, err)
	return out.Attributes
}

// TestSetupGivesAHighThroughputQueuesDLQItsScope: worker setup
// --high-throughput --dlq made a plain FIFO DLQ, whose queue-wide dedup is
// wider than the queue's (per message group).
func TestSetupGivesAHighThroughputQueuesDLQItsScope(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	var out bytes.Buffer
	spec := queueSpec{name: "orders.fifo", dlq: "orders-dlq.fifo", maxReceive: 5, visibility: 30e9, perGroup: true}
	require.NoError(t, setupQueue(context.Background(), c, &out, spec))
	for _, name := range []string{"orders.fifo", "orders-dlq.fifo"} {
		a := queueAttrs(t, c, name)
		require.Equal(t, "messageGroup", a["DeduplicationScope"], name)
		require.Equal(t, "perMessageGroupId", a["FifoThroughputLimit"], name)
	}
	require.Contains(t, queueAttrs(t, c, "orders.fifo")["RedrivePolicy"], "orders-dlq.fifo")
	// Idempotent.
	require.NoError(t, setupQueue(context.Background(), c, &bytes.Buffer{}, spec))

	// A plain FIFO queue leaves its DLQ plain.
	require.NoError(t, setupQueue(context.Background(), c, &out, queueSpec{name: "plain.fifo", dlq: "plain-dlq.fifo", maxReceive: 5, visibility: 30e9}))
	require.Equal(t, "queue", queueAttrs(t, c, "plain-dlq.fifo")["DeduplicationScope"])
}

// TestSetupDefaultKeepsTheRedriveRule: a FIFO queue that worker setup
// makes with its defaults can be given to Lambda with the largest batch:
// maxReceiveCount above the batch size (docs/DEPLOY.md).
func TestSetupDefaultKeepsTheRedriveRule(t *testing.T) {
	t.Parallel()
	const lambdaFIFOBatchMax = 10 // Lambda's limit for FIFO event sources
	require.Greater(t, setupMaxReceive, lambdaFIFOBatchMax)
}
