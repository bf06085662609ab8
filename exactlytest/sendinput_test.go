package exactlytest_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/exactlytest"
)

// TestSendInput: the message's body, attributes (Key is idempotency-key)
// and, on a FIFO queue only, its group and deduplication id.
func TestSendInput(t *testing.T) {
	t.Parallel()
	m := exactlytest.Msg("b", exactlytest.Key("k-1"), exactlytest.Attr("tenant", "t"), exactlytest.Group("g2"), exactlytest.DedupID("d"))
	in := exactlytest.SendInput("https://sqs.example/1/q.fifo", m)
	require.Equal(t, "https://sqs.example/1/q.fifo", aws.ToString(in.QueueUrl))
	require.Equal(t, "b", aws.ToString(in.MessageBody))
	require.Equal(t, "g2", aws.ToString(in.MessageGroupId))
	require.Equal(t, "d", aws.ToString(in.MessageDeduplicationId))
	require.Len(t, in.MessageAttributes, 2)
	require.Equal(t, "String", aws.ToString(in.MessageAttributes["idempotency-key"].DataType))
	require.Equal(t, "k-1", aws.ToString(in.MessageAttributes["idempotency-key"].StringValue))
	require.Equal(t, "t", aws.ToString(in.MessageAttributes["tenant"].StringValue))

	std := exactlytest.SendInput("https://sqs.example/1/q", exactlytest.Msg("b"))
	require.Nil(t, std.MessageGroupId, "a standard queue refuses a group")
	require.Nil(t, std.MessageDeduplicationId)
	require.Nil(t, std.MessageAttributes)
}
