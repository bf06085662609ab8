package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/outboxschema"
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
		// 1.5 MB waiting: an emulator's one-second poll can come back
		// empty on a loaded machine (a fresh-clone CI run did).
		bodies := e.receivedAll(t, e.q1, 6)
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
		key := len(outbox.IdempotencyKeyAttribute) + len("String") + len(outbox.Key("g", id))
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

// TestASizeRefusalHoldsTheGroup: an operator lowers the queue's
// MaximumMessageSize under a message Write took. SQS refuses it; the relay
// holds its group (publishes nothing more of it, says why, counts it)
// instead of passing to the group's next message, and the other groups go
// on. Release publishes it as it is once the queue takes it again; Drop
// skips it, marked dropped, and the rest of the group follows.
func TestASizeRefusalHoldsTheGroup(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, nil)
		ob := outbox.New(e.db, e.table)
		for _, m := range []outbox.Message{msg(q, "a", "a1"), outbox.Message{QueueURL: q, Group: "a", Body: bigBody("a2", 4096), ID: "id-a2"}, msg(q, "a", "a3"), msg(q, "b", "b1")} {
			require.NoError(t, ob.Write(ctx, []outbox.Message{m}))
		}
		setMaxSize(t, e, q, 1024)
		r := e.relay()
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published, "a1 and b1")
		require.Zero(t, round.Failed, "nothing passed")
		require.Equal(t, 1, round.Held)
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, round.Published, "a3 waits behind the held a2")
		require.Equal(t, 1, round.Held, "still held: the gauge")
		bodies, _ := e.received(t, q)
		require.Equal(t, []string{"a1"}, bodies["a"])

		items, err := outbox.ListGroup(ctx, e.db, e.table, q, "a", 10)
		require.NoError(t, err)
		require.Len(t, items, 3)
		require.Contains(t, items[1].Held, "InvalidParameterValue", "why, on the message")
		require.Empty(t, items[2].Held)
		pending, err := outbox.ListPending(ctx, e.db, e.table, 10)
		require.NoError(t, err)
		require.Len(t, pending, 2, "a2 and a3 are still to publish")
		require.NotEmpty(t, pending[0].Held)

		require.ErrorIs(t, outbox.Release(ctx, e.db, e.table, q, "b", "id-b1"), outbox.ErrNotHeld)
		setMaxSize(t, e, q, 262144)
		require.NoError(t, outbox.Release(ctx, e.db, e.table, q, "a", "id-a2"))
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published)
		require.Zero(t, round.Held)
		bodies, _ = e.received(t, q)
		require.Equal(t, []string{bigBody("a2", 4096), "a3"}, bodies["a"], "in order, nothing skipped")
	})
}

// TestAGroupHeldAtItsFirstMessageMovesOnWhenReleased: the hold records the
// head's published mark (0 when nothing of the group was published yet);
// after a release, the relay's progress must still be recordable from that
// mark. The relay once conditioned a mark of 0 on there being none, so a group held at its first
// message and released was published again and again, never recorded, and
// never drained.
func TestAGroupHeldAtItsFirstMessageMovesOnWhenReleased(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, nil)
		r := writeAndHold(t, e, q, outbox.Message{QueueURL: q, Group: "a", Body: bigBody("a1", 4096), ID: "id-a1"}, msg(q, "a", "a2"))
		setMaxSize(t, e, q, 262144)
		require.NoError(t, outbox.Release(ctx, e.db, e.table, q, "a", "id-a1"))
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published)
		require.Zero(t, round.Errors, "the progress is recorded")
		pending, err := outbox.ListPending(ctx, e.db, e.table, 10)
		require.NoError(t, err)
		require.Empty(t, pending, "the group is drained")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "nothing published again")
	})
}

func TestDropSkipsTheHeldMessage(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, nil)
		r := writeAndHold(t, e, q, outbox.Message{QueueURL: q, Group: "a", Body: bigBody("a1", 4096), ID: "id-a1"}, msg(q, "a", "a2"))
		require.ErrorIs(t, outbox.Drop(ctx, e.db, e.table, q, "a", "id-a2"), outbox.ErrNotHeld, "only the held message can be dropped")
		require.NoError(t, outbox.Drop(ctx, e.db, e.table, q, "a", "id-a1"))
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Published)
		require.Zero(t, round.Held)
		bodies, _ := e.received(t, q)
		require.Equal(t, []string{"a2"}, bodies["a"])
		items, err := outbox.ListGroup(ctx, e.db, e.table, q, "a", 10)
		require.NoError(t, err)
		require.Contains(t, items[0].Dropped, "InvalidParameterValue")
		require.Empty(t, items[0].Held)
		require.False(t, items[0].SentAt.IsZero(), "dropped: done, with a TTL")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "the group left the pending index")
	})
}

// TestOnlyRefusalsOfTheMessageItselfPass: SQS's refusal of a message for
// what it holds (InvalidMessageContents: characters its producer could
// know of, which Write refuses) marks it failed and its group goes on; a
// refusal the relay cannot tell is about the message (any other code)
// holds the group.
func TestOnlyRefusalsOfTheMessageItselfPass(t *testing.T) {
	for code, held := range map[string]bool{"InvalidMessageContents": false, "AWS.SimpleQueueService.InvalidMessageContents": false, "KmsAccessDenied": true, "SomethingNew": true} {
		t.Run(code, func(t *testing.T) {
			each(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				ob := outbox.New(e.db, e.table)
				require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "bad"), msg(e.q1, "a", "a2")}))
				r := &outbox.Relay{DB: e.db, SQS: &faultySQS{sqsAPI: e.sqs, refuse: "bad", refuseCode: code}, Table: e.table}
				round, err := r.Sweep(ctx)
				require.NoError(t, err)
				bodies, _ := e.received(t, e.q1)
				if held {
					require.Equal(t, outbox.Round{Groups: 1, Held: 1, Lag: round.Lag}, round)
					require.Empty(t, bodies["a"])
					return
				}
				require.Equal(t, 1, round.Failed)
				require.Equal(t, []string{"a2"}, bodies["a"])
			})
		})
	}
}

// TestOneIDInTwoGroupsIsTwoMessages: two groups of a queue-scoped FIFO
// queue (DeduplicationScope=queue, the default) may use one message ID
// (a transfer's id for its debit and its credit, say). Were the ID the
// MessageDeduplicationId, SQS would drop the second within five minutes,
// and an exactly worker, keying on the idempotency-key per queue, would
// take it for a duplicate: a lost message. The relay's key includes the
// group.
func TestOneIDInTwoGroupsIsTwoMessages(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{
			{QueueURL: e.q1, Group: "debit-a", Body: "debit", ID: "transfer-42"},
			{QueueURL: e.q1, Group: "credit-b", Body: "credit", ID: "transfer-42"},
		}))
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published)
		bodies, keys := e.received(t, e.q1)
		require.Equal(t, []string{"debit"}, bodies["debit-a"])
		require.Equal(t, []string{"credit"}, bodies["credit-b"], "not dropped as a duplicate of the debit")
		require.NotEqual(t, keys["debit"], keys["credit"], "two keys for the worker too")
		require.Equal(t, outbox.Key("debit-a", "transfer-42"), keys["debit"])
	})
}

// TestAMessageWrittenBeforeTheKeyChangedKeepsItsKey: the relay publishes
// a message under the key stored with it when it was written, not the key
// Key gives now: a message written by an older Write (here: of no group,
// whose id holds a '/', once keyed by its id) and published by a newer
// relay keeps its key, so a copy of it published again is still the
// same message for SQS and the worker.
func TestAMessageWrittenBeforeTheKeyChangedKeepsItsKey(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q, _ := testenv.NewQueue(t, e.sqs, false, nil, 0)
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: q, Body: "old", ID: "a/b"}, {QueueURL: q, Body: "new", ID: "c/d"}}))
		_, err := e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: &e.table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: &types.AttributeValueMemberS{Value: q + "#"}, outboxschema.AttrSK: &types.AttributeValueMemberN{Value: "1"}},
			UpdateExpression: aws.String("SET #key = :old"), ConditionExpression: aws.String("#id = :id"),
			ExpressionAttributeNames:  map[string]string{"#key": outboxschema.AttrKey, "#id": outboxschema.AttrID},
			ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberS{Value: "a/b"}, ":id": &types.AttributeValueMemberS{Value: "a/b"}},
		}}}})
		require.NoError(t, err, "the item as the older Write stored it")
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published)
		_, keys := e.received(t, q)
		require.Equal(t, "a/b", keys["old"], "the key it was written with")
		require.Equal(t, outbox.Key("", "c/d"), keys["new"])
		require.NotEqual(t, "c/d", keys["new"])
	})
}

func TestKey(t *testing.T) {
	long := strings.Repeat("i", 128)
	for _, tc := range []struct{ group, id, want string }{
		{"", "x", "x"},
		{"g", "x", "g/x"},
		{"a/b", "c", outbox.Key("a/b", "c")},
	} {
		require.Equal(t, tc.want, outbox.Key(tc.group, tc.id))
	}
	require.NotEqual(t, outbox.Key("a/b", "c"), outbox.Key("a", "b/c"), "a '/' in the group cannot make two keys one")
	require.NotEqual(t, outbox.Key("", "a/b"), outbox.Key("a", "b"), "a '/' in an id of no group cannot make two keys one")
	require.Regexp(t, "^h[0-9a-f]{63}$", outbox.Key("", "a/b"))
	hashed := outbox.Key("a/b", "c")
	require.NotEqual(t, hashed, outbox.Key("", hashed), "an id of no group shaped like a hashed key is hashed too")
	require.Equal(t, "H"+hashed[1:], outbox.Key("", "H"+hashed[1:]), "only that shape")
	require.Regexp(t, "^h[0-9a-f]{63}$", outbox.Key("a/b", "c"))
	for _, k := range []string{outbox.Key("g", long), outbox.Key(long, long), outbox.Key("a/b", "c")} {
		require.True(t, outbox.ValidID(k), "a valid dedup id: %q", k)
	}
}
