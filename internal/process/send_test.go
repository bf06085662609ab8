package process_test

import (
	"context"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/outbox"
)

const confirmations = "http://sqs.local/000000000000/confirmations.fifo"

// movingDB lets another producer append to the outbox group "g" just before
// each of the first `moves` commits: the commit's outbox items then find
// their places taken.
type movingDB struct {
	*memdynamo.DB
	other *outbox.Outbox
	moves atomic.Int32
	n     atomic.Int32
}

func (m *movingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if m.moves.Add(-1) >= 0 {
		if err := m.other.Write(ctx, []outbox.Message{{QueueURL: confirmations, Group: "g", Body: fmt.Sprint("other-", m.n.Add(1))}}); err != nil {
			return nil, err
		}
	}
	return m.DB.TransactWriteItems(ctx, in, opts...)
}

// sending sets b up with an outbox and an effect that sends one message
// per delivery, keyed by the message's dedup key.
func sending(t *testing.T, optimistic bool) (*bundle, *movingDB) {
	b := setup(t)
	_, err := b.db.CreateTable(context.Background(), outboxschema.CreateTableInput("outbox"))
	require.NoError(t, err)
	m := &movingDB{DB: b.db, other: outbox.New(b.db, "outbox")}
	b.store = dedup.NewStore(m, "dedup")
	b.proc.Store = b.store
	b.proc.Outbox = outbox.New(m, "outbox")
	b.proc.Optimistic = optimistic
	b.effect = func(_ context.Context, in effect.Input) (effect.Output, error) {
		return effect.Output{Result: []byte("ok"), Send: []effect.Outgoing{{QueueURL: confirmations, Group: "g", Body: "confirm " + in.Message.ID, ID: in.Key + "/confirm"}}}, nil
	}
	return b, m
}

// pendingBodies lists the outbox's pending messages' bodies, in order.
func pendingBodies(t *testing.T, b *bundle) []string {
	t.Helper()
	items, err := outbox.ListPending(context.Background(), b.db, "outbox", 100)
	require.NoError(t, err)
	var out []string
	for _, it := range items {
		out = append(out, it.Body)
	}
	return out
}

// TestSendCommitsWithTheRecord: the messages an effect sends are in the
// outbox exactly when its record is COMPLETED: once per logical message,
// a duplicate sends nothing, in claim and optimistic modes.
func TestSendCommitsWithTheRecord(t *testing.T) {
	t.Parallel()
	for _, optimistic := range []bool{false, true} {
		t.Run(fmt.Sprint("optimistic=", optimistic), func(t *testing.T) {
			b, _ := sending(t, optimistic)
			r := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.True(t, r.Applied)
			require.Equal(t, "COMPLETED", status(t, b, r.Key))
			d := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
			require.Equal(t, dedup.Duplicate, d.Outcome)
			r = b.proc.Process(context.Background(), msg("2", "body"), process.Hooks{})
			require.True(t, r.Applied)
			require.Equal(t, []string{"confirm 1", "confirm 2"}, pendingBodies(t, b))
		})
	}
}

// TestSendRetriesWhenTheGroupMoves: another producer appends to the group
// between the commit's read of it and its transaction; the commit reads
// the group again and goes after it, nothing lost or doubled.
func TestSendRetriesWhenTheGroupMoves(t *testing.T) {
	t.Parallel()
	for _, optimistic := range []bool{false, true} {
		t.Run(fmt.Sprint("optimistic=", optimistic), func(t *testing.T) {
			b, m := sending(t, optimistic)
			m.moves.Store(2) // claim mode's claim is a PutItem: its commit is the first transaction too
			r := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.Equal(t, 2, r.CommitRetries)
			require.Equal(t, []string{"other-1", "other-2", "confirm 1"}, pendingBodies(t, b))
		})
	}
}

// TestSendFailuresArePermanent: no outbox, or a message SQS would refuse:
// the message fails for good and nothing is committed.
func TestSendFailuresArePermanent(t *testing.T) {
	t.Parallel()
	b, _ := sending(t, true)
	b.proc.Outbox = nil
	r := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.ErrorContains(t, r.Err, "no outbox is configured")
	require.Empty(t, status(t, b, r.Key), "nothing committed")

	b, _ = sending(t, false)
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		return effect.Output{Send: []effect.Outgoing{{QueueURL: confirmations, Body: "no group on a FIFO queue"}}}, nil
	}
	r = b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.ErrorIs(t, r.Err, outbox.ErrInvalid)
	require.NotEqual(t, "COMPLETED", status(t, b, r.Key))
	require.Empty(t, pendingBodies(t, b))
}
