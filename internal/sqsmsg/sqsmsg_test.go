package sqsmsg

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

func TestCopyDeduplicationID(t *testing.T) {
	t.Parallel()
	id := "41a61ac3-027e-4e63-9a8e-b1692fccb95c"
	require.Equal(t, "dlq-"+id, CopyDeduplicationID(id), "an AWS message id fits as it is")
	require.NotEqual(t, CopyDeduplicationID(id), CopyDeduplicationID("other"))

	long := strings.Repeat("x", 200)
	got := CopyDeduplicationID(long)
	require.LessOrEqual(t, len(got), 128, "SQS's limit")
	require.True(t, strings.HasPrefix(got, "dlq-sha256-"))
	require.NotEqual(t, got, CopyDeduplicationID(long+"y"))
	require.True(t, strings.HasPrefix(CopyDeduplicationID("has space"), "dlq-sha256-"), "a character SQS does not take")
}

func TestDeadLetterCopy(t *testing.T) {
	t.Parallel()
	body := aws.String("b")
	m := effect.Message{ID: "m1", Group: "g", DedupID: "d1"}
	in, err := DeadLetterCopy("dlq", true, m, body, nil, nil, time.Time{})
	require.NoError(t, err)
	require.Equal(t, "g", aws.ToString(in.MessageGroupId))
	require.Equal(t, "dlq-m1", aws.ToString(in.MessageDeduplicationId), "not the source's dedup id")
	require.Equal(t, "d1", aws.ToString(in.MessageAttributes["idempotency-key"].StringValue), "the source's dedup key")

	in, err = DeadLetterCopy("dlq", false, effect.Message{ID: "m1"}, body, nil, nil, time.Time{})
	require.NoError(t, err)
	require.Nil(t, in.MessageGroupId)
	require.Nil(t, in.MessageDeduplicationId)

	full := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		full["a"+strconv.Itoa(i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	_, err = DeadLetterCopy("dlq", true, m, body, full, errors.New("x"), time.Now())
	require.ErrorIs(t, err, ErrNoRoomForKey, "no lossy copy")
}

// TestDeadLetterCopyCarriesItsFailure: why and when, as room allows after
// the message's own attributes and its key; a copy made again replaces
// them; the text is cut to FailureMaxBytes of valid UTF-8, with the
// characters SQS refuses replaced.
func TestDeadLetterCopyCarriesItsFailure(t *testing.T) {
	t.Parallel()
	m := effect.Message{ID: "m1", Group: "g", DedupID: "d1"}
	at := time.Date(2026, 11, 25, 2, 30, 0, 0, time.UTC)
	in, err := DeadLetterCopy("dlq", true, m, aws.String("b"), nil, errors.New("ledger body has no \"account\"\x00"), at)
	require.NoError(t, err)
	require.Equal(t, `ledger body has no "account"?`, aws.ToString(in.MessageAttributes[FailureAttribute].StringValue))
	require.Equal(t, "2026-11-25T02:30:00Z", aws.ToString(in.MessageAttributes[FailedAtAttribute].StringValue))

	// Again (a replay that failed again): replaced, not piled up.
	again, err := DeadLetterCopy("dlq", true, m, aws.String("b"), in.MessageAttributes, errors.New(strings.Repeat("é", 300)), at.Add(time.Hour))
	require.NoError(t, err)
	why := aws.ToString(again.MessageAttributes[FailureAttribute].StringValue)
	require.LessOrEqual(t, len(why), FailureMaxBytes)
	require.True(t, utf8.ValidString(why))
	require.Equal(t, "2026-11-25T03:30:00Z", aws.ToString(again.MessageAttributes[FailedAtAttribute].StringValue))
	require.Len(t, again.MessageAttributes, 3)

	// Room for the key and one more: the reason, not the time; none: neither.
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 8 {
		attrs["a"+strconv.Itoa(i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	in, err = DeadLetterCopy("dlq", true, m, aws.String("b"), attrs, errors.New("x"), at)
	require.NoError(t, err)
	require.Len(t, in.MessageAttributes, 10)
	require.Contains(t, in.MessageAttributes, FailureAttribute)
	require.NotContains(t, in.MessageAttributes, FailedAtAttribute)
	attrs["a8"] = attrs["a0"]
	in, err = DeadLetterCopy("dlq", true, m, aws.String("b"), attrs, errors.New("x"), at)
	require.NoError(t, err)
	require.Len(t, in.MessageAttributes, 10, "the key first; no room for the failure")
	require.Contains(t, in.MessageAttributes, "idempotency-key")
	require.Equal(t, attrs, WithoutFailure(attrs), "nothing to take off")
}
