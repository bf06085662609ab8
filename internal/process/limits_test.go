package process_test

import (
	"context"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/outbox"
)

// puts is n Puts of distinct items of the ledger table, each with pad
// bytes of padding, named after prefix.
func puts(prefix string, n, pad int) []types.TransactWriteItem {
	out := make([]types.TransactWriteItem, n)
	for i := range out {
		it := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", prefix, i)}}
		if pad > 0 {
			it["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", pad)}
		}
		out[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String("ledger"), Item: it}}
	}
	return out
}

// requireTooLarge checks the outcome of a commit that cannot fit one
// transaction: a permanent failure naming the limit, decided before any
// request and without retries (no virtual time passes), the effect run
// once, nothing applied, the claim (if any) released.
func requireTooLarge(t *testing.T, b *bundle, f *faultDB, r process.Result, start time.Time, want string) {
	t.Helper()
	require.Equal(t, process.Fail, r.Action, "err: %v", r.Err)
	require.True(t, effect.IsPermanent(r.Err), "err: %v", r.Err)
	require.ErrorIs(t, r.Err, dedup.ErrInvalid)
	require.ErrorContains(t, r.Err, want)
	require.False(t, r.Applied)
	require.Zero(t, r.CommitRetries)
	require.Less(t, time.Since(start), time.Second, "a retry loop ran (virtual time)")
	require.EqualValues(t, 1, b.calls.Load(), "the effect ran once")
	require.Zero(t, f.count("tx"), "no transaction was sent")
	out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("ledger"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "w#0"}}})
	require.NoError(t, err)
	require.Empty(t, out.Item, "nothing applied")
	if rec := b.record(t, r.Key); rec != nil {
		require.Equal(t, "IN_PROGRESS", rec["status"].(*types.AttributeValueMemberS).Value)
		require.Equal(t, "0", rec["lease_until"].(*types.AttributeValueMemberN).Value, "released")
	}
}

// TestCommitOverTheTransactionLimit: an effect whose commit needs more
// than DynamoDB's 100 actions in one TransactWriteItems (100 writes and
// the record) fails permanently at once, in transactional and optimistic
// mode; 99 writes and the record fit. Before, the commit returned a plain
// error that was retried for the whole commit timeout (a virtual minute
// here), on every delivery.
func TestCommitOverTheTransactionLimit(t *testing.T) {
	t.Parallel()
	writesModes(t, func(t *testing.T, b *bundle, f *faultDB) {
		n := 100
		b.effect = func(context.Context, effect.Input) (effect.Output, error) {
			return effect.Output{Writes: puts("w", n, 0)}, nil
		}
		start := time.Now()
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		requireTooLarge(t, b, f, r, start, "101 items")
		require.ErrorContains(t, r.Err, "at most 100")

		n = 99
		r = b.proc.Process(context.Background(), msg("2", "x"), process.Hooks{})
		require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		require.True(t, r.Applied)
	})
}

// writesModes runs a test, on virtual time, in the two modes whose
// effect's whole effect is its writes: transactional (a claim, then the
// commit) and optimistic.
func writesModes(t *testing.T, test func(t *testing.T, b *bundle, f *faultDB)) {
	t.Helper()
	for _, mode := range []string{"tx", "optimistic"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setup(t)
				f := withFaults(t, b)
				b.proc.Optimistic = mode == "optimistic"
				test(t, b, f)
			})
		})
	}
}

// TestCommitWithSendOverTheTransactionLimit: in claim mode (the effect has
// run outside), writes plus the outbox items of the messages it sends plus
// the record pass 100: a permanent failure, at once, naming the parts.
// Before, a plain error retried for the commit timeout.
func TestCommitWithSendOverTheTransactionLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		_, err := b.db.CreateTable(context.Background(), outboxschema.CreateTableInput("outbox"))
		require.NoError(t, err)
		f := withFaults(t, b)
		b.proc.Outbox = outbox.New(f, "outbox")
		b.effect = func(_ context.Context, in effect.Input) (effect.Output, error) {
			var send []effect.Outgoing
			for i := range 40 {
				send = append(send, effect.Outgoing{QueueURL: confirmations, Group: "g", Body: "b", ID: fmt.Sprintf("%s/%d", in.Key, i)})
			}
			return effect.Output{Writes: puts("w", 60, 0), Send: send}, nil
		}
		start := time.Now()
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		// 60 writes, 41 outbox items (the group's head and 40 messages), the record.
		requireTooLarge(t, b, f, r, start, "102 items")
		require.ErrorContains(t, r.Err, "60 writes")
		require.ErrorContains(t, r.Err, "40 messages to send")
	})
}

// TestCommitItemOver400KB: a write whose item passes DynamoDB's 400 KB
// fails permanently before any request; one just under it commits. An
// update that DynamoDB itself refuses for the size of the item it would
// make is permanent too (a ValidationException), not retried.
func TestCommitItemOver400KB(t *testing.T) {
	t.Parallel()
	writesModes(t, func(t *testing.T, b *bundle, f *faultDB) {
		pad := 400 * 1024
		b.effect = func(context.Context, effect.Input) (effect.Output, error) {
			return effect.Output{Writes: puts("w", 1, pad)}, nil
		}
		start := time.Now()
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		requireTooLarge(t, b, f, r, start, "400 KB")

		// pk "w#0" (2+3) and "pad" (3): the item is exactly 400 KB.
		pad = 400*1024 - 8
		r = b.proc.Process(context.Background(), msg("2", "x"), process.Hooks{})
		require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)

		// Growing that item past 400 KB: only DynamoDB can tell.
		b.effect = func(context.Context, effect.Input) (effect.Output, error) {
			return effect.Output{Writes: []types.TransactWriteItem{{Update: &types.Update{
				TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "w#0"}},
				UpdateExpression:          aws.String("SET more = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "yy"}},
			}}}}, nil
		}
		before := f.count("tx")
		r = b.proc.Process(context.Background(), msg("3", "x"), process.Hooks{})
		require.Equal(t, process.Fail, r.Action, "err: %v", r.Err)
		require.True(t, effect.IsPermanent(r.Err))
		require.ErrorIs(t, r.Err, dedup.ErrInvalid)
		require.Equal(t, before+1, f.count("tx"), "not retried")
	})
}

// TestGroupCommitSplitsAtTheLimits: a group commit never passes a
// transaction's limits: commits that fit alone all commit, the group
// split by the count of items (a 99-write commit after small ones) and by
// their bytes (three commits of 1.6 MB each: 4 MB per transaction), with
// no request refused as a whole on the way. Before, the bytes were not
// counted: the group's request failed and each commit went again alone.
func TestGroupCommitSplitsAtTheLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		b.effect = func(_ context.Context, in effect.Input) (effect.Output, error) {
			switch in.Message.Body {
			case "big":
				return effect.Output{Writes: puts("n"+in.Message.ID, 99, 0)}, nil
			case "heavy":
				return effect.Output{Writes: puts("h"+in.Message.ID, 4, 400*1024-100)}, nil
			}
			return effect.Output{Writes: puts("s"+in.Message.ID, 1, 0)}, nil
		}
		rs := processAll(b, msg("1", "small"), msg("2", "small"), msg("3", "big"))
		for _, r := range rs {
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.True(t, r.Applied)
			require.Zero(t, r.CommitRetries)
		}
		first := f.count("tx")
		require.LessOrEqual(t, first, 3, "at most one request each")

		rs = processAll(b, msg("4", "heavy"), msg("5", "heavy"), msg("6", "heavy"))
		for _, r := range rs {
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.Zero(t, r.CommitRetries, "a request was refused as a whole and retried")
		}
		require.Equal(t, first+2, f.count("tx"), "3 x 1.6 MB: two transactions")
	})
}
