package pool

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
)

func TestWithKeyKeepsTheAutoKey(t *testing.T) {
	t.Parallel()
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	key := func(attrs map[string]types.MessageAttributeValue) string {
		return aws.ToString(attrs["idempotency-key"].StringValue)
	}
	tenant := map[string]types.MessageAttributeValue{"tenant": str("t1")}

	out, ok := WithKey(effect.Message{ID: "m1", DedupID: "d1"}, tenant)
	require.True(t, ok)
	require.Equal(t, "d1", key(out), "FIFO: the dedup id")
	require.Equal(t, "t1", aws.ToString(out["tenant"].StringValue))
	require.NotContains(t, tenant, "idempotency-key", "the input is not modified")

	out, ok = WithKey(effect.Message{ID: "m1"}, nil)
	require.True(t, ok)
	require.Equal(t, "m1", key(out), "standard: the message id")

	own := map[string]types.MessageAttributeValue{"idempotency-key": str("k1")}
	out, ok = WithKey(effect.Message{ID: "m1", DedupID: "d1"}, own)
	require.True(t, ok)
	require.Equal(t, "k1", key(out), "the producer's key wins")

	full := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		full["a"+strconv.Itoa(i)] = str("v")
	}
	out, ok = WithKey(effect.Message{ID: "m1"}, full)
	require.False(t, ok, "SQS takes at most 10 attributes")
	require.Len(t, out, 10)
}
