package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

// newQueue is another FIFO queue of e, with attrs.
func newQueue(t *testing.T, e *env, attrs map[string]string) string {
	url, _ := testenv.NewQueue(t, e.sqs, true, attrs, 0)
	return url
}

// setMaxSize sets a queue's MaximumMessageSize, as an operator may at any time.
func setMaxSize(t *testing.T, e *env, q string, n int) {
	_, err := e.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"MaximumMessageSize": fmt.Sprint(n)}})
	require.NoError(t, err)
}

// bigBody is a body of n bytes, distinct per tag.
func bigBody(tag string, n int) string { return tag + strings.Repeat("x", n-len(tag)) }

// TestBatchesFitSQSRequestLimit: the next messages of ten groups can pass
// SQS's 1 MiB limit on a SendMessageBatch together. The relay sizes its
// batches to fit, so every group is published in one round.
func TestBatchesFitSQSRequestLimit(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		var msgs []outbox.Message
		for g := range 6 {
			msgs = append(msgs, outbox.Message{QueueURL: e.q1, Group: fmt.Sprint("g", g), Body: bigBody(fmt.Sprint("g", g, "-"), 250*1024), ID: fmt.Sprint("id-g", g)})
		}
		for _, m := range msgs {
			require.NoError(t, ob.Write(ctx, []outbox.Message{m}))
		}
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 6, round.Published, "six messages of 250 KiB: more than one request's 1 MiB together")
		require.Zero(t, round.Errors)
		bodies, _ := e.received(t, e.q1)
		require.Len(t, bodies, 6)
	})
}

// tooLongSQS refuses any batch of more than one entry as SQS refuses one
// over 1 MiB: the relay's own sizing notwithstanding, it splits.
type tooLongSQS struct {
	sqsAPI
	refused int
}

func (s *tooLongSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if len(in.Entries) > 1 {
		s.refused++
		return nil, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.BatchRequestTooLong", Message: "Batch requests cannot be longer than 1048576 bytes."}
	}
	return s.sqsAPI.SendMessageBatch(ctx, in, opts...)
}

// TestBatchRequestTooLongSplits: should SQS still refuse a batch as too
// long (its count may differ from the relay's), the relay splits it.
func TestBatchRequestTooLongSplits(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		for g := range 5 {
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, fmt.Sprint("g", g), fmt.Sprint("m", g))}))
		}
		s := &tooLongSQS{sqsAPI: e.sqs}
		round, err := (&outbox.Relay{DB: e.db, SQS: s, Table: e.table}).Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, round.Published, "split down to single entries")
		require.Zero(t, round.Errors)
		require.Positive(t, s.refused)
	})
}

// TestARequestTheRelayCannotMakeIsAnError: a SendMessageBatch that fails
// leaves its groups for the next round and counts them in Round.Errors
// (exactly_outbox_errors_total), not only in a warning line.
func TestARequestTheRelayCannotMakeIsAnError(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1"), msg(e.q1, "b", "b1")}))
		round, err := (&outbox.Relay{DB: e.db, SQS: noSQS{}, Table: e.table}).Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Errors, "both groups wait for the next round after an error")
		require.Zero(t, round.Published)
		round, err = e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published)
	})
}

// TestWriteCountsTheRelaysKey: Write refuses a message whose body and
// attributes fit SQS's limit only without the idempotency-key attribute the
// relay adds; one that fits with it is published to a queue of that size.
func TestWriteCountsTheRelaysKey(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, map[string]string{"MaximumMessageSize": fmt.Sprint(outbox.MaxBodyBytes)})
		ob := outbox.New(e.db, e.table)
		id := strings.Repeat("k", 128)
		key := len(outbox.IdempotencyKeyAttribute) + len("String") + len(id)
		attrs := map[string]string{"kind": "deposit"}
		fits := outbox.MaxBodyBytes - key - len("kind") - len("String") - len("deposit")
		err := ob.Write(ctx, []outbox.Message{{QueueURL: q, Group: "g", Body: bigBody("over", fits+1), Attributes: attrs, ID: id}})
		require.ErrorIs(t, err, outbox.ErrInvalid, "one byte too many once the relay's key is counted")
		require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: q, Group: "g", Body: bigBody("at", fits), Attributes: attrs, ID: id}}))
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Published, "SQS takes it, key and all")
		require.Zero(t, round.Failed)
	})
}
