package outbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// beforeTransact runs once, before the first TransactWriteItems through
// it: what happens between an operation's read and its transaction.
type beforeTransact struct {
	dbAPI
	once sync.Once
	hook func()
}

func (b *beforeTransact) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	b.once.Do(b.hook)
	return b.dbAPI.TransactWriteItems(ctx, in, optFns...)
}

// TestDropRacingReleaseIsRefused: two operators act on one held group;
// Release commits between Drop's read and its transaction, and the relay
// publishes the released message. Drop must refuse (ErrNotHeld): the
// message SQS took is not marked dropped, the head's mark does not go
// back, and the group's next message is published once and recorded.
func TestDropRacingReleaseIsRefused(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, nil)
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: q, Group: "a", Body: bigBody("a1", 4096), ID: "id-a1"}}))
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(q, "a", "a2")}))
		setMaxSize(t, e, q, 1024)
		r := e.relay()
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Held)
		setMaxSize(t, e, q, 262144)

		racing := &beforeTransact{dbAPI: e.db, hook: func() {
			require.NoError(t, outbox.Release(ctx, e.db, e.table, q, "a", "id-a1"))
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published)
		}}
		require.ErrorIs(t, outbox.Drop(ctx, racing, e.table, q, "a", "id-a1"), outbox.ErrNotHeld)

		items, err := outbox.ListGroup(ctx, e.db, e.table, q, "a", 10)
		require.NoError(t, err)
		require.Len(t, items, 2)
		require.Empty(t, items[0].Dropped, "SQS took it: not reported dropped")
		bodies, _ := e.received(t, q)
		require.Equal(t, []string{bigBody("a1", 4096), "a2"}, bodies["a"])

		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(q, "a", "a3")}))
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		round.Lag = 0
		require.Equal(t, outbox.Round{Groups: 1, Published: 1}, round, "a3 alone, recorded")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "drained")
		bodies, _ = e.received(t, q)
		require.Equal(t, []string{"a3"}, bodies["a"])
	})
}

// writeAndHold writes msgs one Write each to q, lowers q's
// MaximumMessageSize to 1024 bytes and sweeps once: a group whose first
// pending message is larger is held there. It returns the relay.
func writeAndHold(t *testing.T, e *env, q string, msgs ...outbox.Message) *outbox.Relay {
	t.Helper()
	ctx := context.Background()
	ob := outbox.New(e.db, e.table)
	for _, m := range msgs {
		require.NoError(t, ob.Write(ctx, []outbox.Message{m}))
	}
	setMaxSize(t, e, q, 1024)
	r := e.relay()
	round, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, round.Held)
	return r
}

// TestReleaseOfAHoldSinceReplacedIsRefused: an operator reads a hold at a1
// and confirms its release; meanwhile a second operator drops a1 and the
// relay holds the group at a3, for a reason the first never saw (here a
// size; it may be a Reordered break, whose consumers may have had messages
// out of order). Release names the held message the operator saw, and is
// refused for another: releasing whatever hold it found would let a hold
// no operator saw go unseen and the group move on.
func TestReleaseOfAHoldSinceReplacedIsRefused(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		q := newQueue(t, e, nil)
		r := writeAndHold(t, e, q, outbox.Message{QueueURL: q, Group: "a", Body: bigBody("a1", 4096), ID: "id-a1"}, msg(q, "a", "a2"),
			outbox.Message{QueueURL: q, Group: "a", Body: bigBody("a3", 4096), ID: "id-a3"})
		seen, _, held, err := outbox.HeldItem(ctx, e.db, e.table, q, "a")
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, "id-a1", seen.ID)

		require.NoError(t, outbox.Drop(ctx, e.db, e.table, q, "a", "id-a1"))
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Published, "a2")
		require.Equal(t, 1, round.Held, "at a3")

		require.ErrorIs(t, outbox.Release(ctx, e.db, e.table, q, "a", seen.ID), outbox.ErrNotHeld)
		h, held, err := outbox.GroupHeld(ctx, e.db, e.table, q, "a")
		require.NoError(t, err)
		require.True(t, held, "the hold at a3 stays for an operator to see")
		require.Equal(t, int64(3), h.Seq)
		require.NoError(t, outbox.Release(ctx, e.db, e.table, q, "a", "id-a3"), "the hold shown")
	})
}

// TestAMarkBehindPublishedItemsIsRecorded: a head whose mark is behind
// messages marked published (what a Drop that raced a Release left, the
// mark moved back) is read by a relay that moves the mark on itself past
// them; its progress is conditioned on the mark it read, so it records,
// and takes no failed write for another relay's record.
func TestAMarkBehindPublishedItemsIsRecorded(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a1")}))
		r := e.relay()
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Published)
		pk := e.q1 + "#a"
		_, err = e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName: &e.table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: &types.AttributeValueMemberS{Value: pk}, outboxschema.AttrSK: &types.AttributeValueMemberN{Value: "0"}},
			UpdateExpression: aws.String("SET #sent = :z"), ConditionExpression: aws.String("attribute_exists(#sent)"),
			ExpressionAttributeNames: map[string]string{"#sent": outboxschema.AttrSent}, ExpressionAttributeValues: map[string]types.AttributeValue{":z": &types.AttributeValueMemberN{Value: "0"}},
		}}}})
		require.NoError(t, err)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", "a2")}))
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		round.Lag = 0
		require.Equal(t, outbox.Round{Groups: 1, Published: 1}, round, "a2, recorded")
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "not published again")
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, []string{"a1", "a2"}, bodies["a"])
	})
}
