package process_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// optimistic sets b up in optimistic mode with the ledger effect, its
// table behind a faultDB.
func optimistic(t *testing.T) (*bundle, *faultDB) {
	b := setup(t)
	b.effect = (&builtin.Ledger{Table: "ledger"}).Apply
	b.proc.Optimistic = true
	return b, withFaults(t, b)
}

func status(t *testing.T, b *bundle, key string) string {
	t.Helper()
	v, _ := b.record(t, key)["status"].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// TestOptimisticIsOneRequest: no claim, no second write: one
// TransactWriteItems applies the ledger's writes with the COMPLETED record;
// a redelivery runs the effect's computation but applies nothing, is told
// duplicate and is deleted, with the stored result.
func TestOptimisticIsOneRequest(t *testing.T) {
	t.Parallel()
	b, f := optimistic(t)
	r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	requireAppliedOnce(t, b, r, "tx")
	require.Equal(t, dedup.Won, r.Outcome)
	require.Equal(t, 1, f.count("tx"))
	require.Zero(t, f.count("claim"))
	require.Zero(t, f.count("complete"))
	require.Zero(t, f.count("lease"))

	d := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	require.Equal(t, process.Delete, d.Action)
	require.Equal(t, dedup.Duplicate, d.Outcome)
	require.False(t, d.Applied)
	require.Equal(t, "250", b.account(t, "a1")["balance_cents"].(*types.AttributeValueMemberN).Value, "a duplicate applied its writes")
	require.Equal(t, 2, f.count("tx"))

	// The same key with another body: a conflict, never applied.
	x := b.proc.Process(context.Background(), msg("1", `{"account":"a1","amount_cents":999,"seq":1}`), process.Hooks{})
	require.Equal(t, process.Fail, x.Action)
	require.Equal(t, dedup.Conflict, x.Outcome)
	require.Equal(t, "250", b.account(t, "a1")["balance_cents"].(*types.AttributeValueMemberN).Value)

	// An effect without writes: the record alone, one PutItem.
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		return effect.Output{Result: []byte("ok")}, nil
	}
	r = b.proc.Process(context.Background(), msg("2", "body"), process.Hooks{})
	require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
	require.True(t, r.Applied)
	require.Equal(t, 1, f.count("claim"))
	require.Equal(t, "COMPLETED", status(t, b, r.Key))
}

// TestOptimisticCommitFaults: a commit that fails without a verdict is
// retried with the same token (a 5xx; TransactionConflict at once); one
// whose response was lost is recognised on the retry; either way the
// writes are applied once.
func TestOptimisticCommitFaults(t *testing.T) {
	t.Parallel()
	for name, faults := range map[string][]fault{
		"5xx":           {failBefore, failBefore},
		"lost response": {loseResponse},
		"conflict":      {txConflict, txConflict, txConflict},
		"lost then 5xx": {loseResponse, failBefore},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, f := optimistic(t)
				f.inject("tx", faults...)
				start := time.Now()
				r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
				requireAppliedOnce(t, b, r, "tx")
				require.Equal(t, len(faults), r.CommitRetries)
				require.Equal(t, len(faults)+1, f.count("tx"))
				if faults[0] == txConflict {
					require.Less(t, time.Since(start), 500*time.Millisecond, "a TransactionConflict waits milliseconds")
				}
			})
		})
	}
}

// TestOptimisticGivesUp: a commit that never gets through gives up within
// the commit timeout: the message comes back, nothing is applied, and no
// record stands in the next delivery's way. One that took effect before it
// gave up is a duplicate to the next delivery.
func TestOptimisticGivesUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := optimistic(t)
		f.failUntilTime("tx", time.Now().Add(time.Hour))
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, process.Retry, r.Action)
		require.ErrorIs(t, r.Err, errServer)
		require.Empty(t, b.account(t, "a1"))
		require.Empty(t, b.record(t, r.Key), "no record: the next delivery applies at once")

		f.failUntilTime("tx", time.Time{})
		b.calls.Store(0)
		r = b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		requireAppliedOnce(t, b, r, "tx")
	})
	synctest.Test(t, func(t *testing.T) {
		b, f := optimistic(t)
		// The first call takes effect, its response lost; every retry fails.
		f.inject("tx", loseResponse)
		for range 50 {
			f.inject("tx", failBefore)
		}
		h := process.Hooks{CommitBy: time.Now().Add(time.Second)}
		r := b.proc.Process(context.Background(), msg("1", deposit), h)
		require.Equal(t, process.Retry, r.Action, "gave up at CommitBy")
		require.Equal(t, "COMPLETED", status(t, b, r.Key))
		f.clear("tx")
		d := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, dedup.Duplicate, d.Outcome)
		require.Equal(t, "250", b.account(t, "a1")["balance_cents"].(*types.AttributeValueMemberN).Value)
	})
}

// TestOptimisticVerdicts: the effect's own condition failing, or a request
// DynamoDB rejects, is a permanent failure at once: no retry, nothing
// applied, no record.
func TestOptimisticVerdicts(t *testing.T) {
	t.Parallel()
	b, f := optimistic(t)
	f.inject("tx", txValidation)
	r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.True(t, effect.IsPermanent(r.Err))
	require.ErrorIs(t, r.Err, dedup.ErrInvalid)
	require.Equal(t, 1, f.count("tx"))
	require.Empty(t, b.record(t, r.Key))

	b.calls.Store(0)
	requireAppliedOnce(t, b, b.proc.Process(context.Background(), msg("2", deposit), process.Hooks{}), "tx")
	// seq 1 again under another key: the account's own condition fails.
	r = b.proc.Process(context.Background(), msg("3", deposit), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	var ece *dedup.EffectConditionError
	require.ErrorAs(t, r.Err, &ece)
	require.Empty(t, b.record(t, r.Key))
}

// TestOptimisticBusyBehindAClaim: a claim-mode worker's live lease (a mixed
// deployment) holds an optimistic commit back, as busy, until it ends.
func TestOptimisticBusyBehindAClaim(t *testing.T) {
	t.Parallel()
	b, _ := optimistic(t)
	key := "t#q.fifo#d-1"
	_, err := b.store.Claim(context.Background(), dedup.ClaimRequest{Key: key, PayloadSHA256: dedup.PayloadHash(deposit), Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	require.Equal(t, process.Retry, r.Action)
	require.Equal(t, dedup.Busy, r.Outcome)
	require.Greater(t, r.After, 50*time.Second)
	require.Empty(t, b.account(t, "a1"))
}

// TestOptimisticFailureGoesTheClaimedWay: an effect that fails is tried
// again under a claim, which tells a duplicate (deleted, not failed) from a
// real failure (judged as in claim mode, the claim released).
func TestOptimisticFailureGoesTheClaimedWay(t *testing.T) {
	t.Parallel()
	b, f := optimistic(t)
	requireAppliedOnce(t, b, b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{}), "tx")
	// The effect now fails for this body (say, it reads state that a
	// duplicate finds changed): the redelivery is still a duplicate.
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		return effect.Output{}, effect.Permanent(errors.New("insufficient funds"))
	}
	d := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	require.Equal(t, process.Delete, d.Action)
	require.Equal(t, dedup.Duplicate, d.Outcome)
	require.EqualValues(t, 2, b.calls.Load(), "run once optimistically, not again under the claim")

	// A message never applied fails as in claim mode; its claim is given back.
	r := b.proc.Process(context.Background(), msg("2", deposit), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.ErrorContains(t, r.Err, "insufficient funds")
	require.Equal(t, "IN_PROGRESS", status(t, b, r.Key))
	require.Equal(t, "0", b.record(t, r.Key)["lease_until"].(*types.AttributeValueMemberN).Value, "released")
	require.Equal(t, 1, f.count("tx"))
}

// TestEffectAndCommitAreTimed: a result says how long the effect and the
// commit took, in both modes (virtual time: exact).
func TestEffectAndCommitAreTimed(t *testing.T) {
	t.Parallel()
	for _, opt := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			b, f := optimistic(t)
			b.proc.Optimistic = opt
			f.slow("tx", 300*time.Millisecond)
			ledger := b.effect
			b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
				time.Sleep(2 * time.Second)
				return ledger(ctx, in)
			}
			r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
			require.True(t, r.Applied, "err: %v", r.Err)
			require.Equal(t, 2*time.Second, r.EffectTook)
			require.Equal(t, 300*time.Millisecond, r.CommitTook)
		})
	}
}

// TestOptimisticFallbackClaimsOnlyWhileHeld: an optimistic effect that fails
// is tried again under a claim, made after the effect ran. If by then the
// caller no longer holds the message (its SQS visibility passed: another
// consumer may have it), no claim is made: the message is left to SQS, as
// a delivery whose visibility passed before it started is.
func TestOptimisticFallbackClaimsOnlyWhileHeld(t *testing.T) {
	t.Parallel()
	b, f := optimistic(t)
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		return effect.Output{}, errors.New("downstream unavailable")
	}
	held := true
	h := process.Hooks{Held: func() bool { return held }}
	held = false // the visibility passed while the effect ran
	r := b.proc.Process(context.Background(), msg("1", deposit), h)
	require.Equal(t, process.Retry, r.Action)
	require.ErrorIs(t, r.Err, process.ErrNotHeld)
	require.Empty(t, status(t, b, r.Key), "no claim was made")
	require.EqualValues(t, 1, b.calls.Load(), "not run again")
	require.Equal(t, 0, f.count("tx"))

	// Still held: the claimed way, as before.
	held = true
	r = b.proc.Process(context.Background(), msg("2", deposit), h)
	require.Equal(t, process.Retry, r.Action)
	require.NotErrorIs(t, r.Err, process.ErrNotHeld)
	require.Equal(t, "IN_PROGRESS", status(t, b, r.Key), "claimed, then released")
	require.EqualValues(t, 3, b.calls.Load())
}

// TestCommitsOnlyWhileHeld: a commit that applies nothing outside (an
// optimistic commit, a transactional one) is made only while the caller
// still holds the message. Past its visibility, SQS may have moved it on (to
// another consumer, or to the DLQ with the rest of its group going on), and
// a commit then would apply it out of its group's order, on what the effect
// read before its successors were applied (a worker frozen past the
// visibility of a message the redrive policy then moved would commit it
// after the next two, losing one's update). Each attempt is
// checked: a commit retried after the visibility passed is not sent.
func TestCommitsOnlyWhileHeld(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"optimistic", "transactional"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, f := optimistic(t)
				b.proc.Optimistic = mode == "optimistic"
				b.proc.WritesOnly = mode == "transactional"
				held := true
				ran := b.effect
				b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
					held = false // the visibility passed while the effect ran
					return ran(ctx, in)
				}
				h := process.Hooks{Held: func() bool { return held }}
				r := b.proc.Process(context.Background(), msg("1", deposit), h)
				require.Equal(t, process.Retry, r.Action)
				require.ErrorIs(t, r.Err, process.ErrNotHeld)
				require.False(t, r.Applied)
				require.Equal(t, 0, f.count("tx"), "no commit sent")
				require.Empty(t, b.account(t, "a1"))
				require.NotEqual(t, "COMPLETED", status(t, b, r.Key))

				// Held until the first attempt fails without a verdict:
				// the retry is not sent.
				b.effect = ran
				f.inject("tx", failBefore)
				h = process.Hooks{Held: func() bool { return f.count("tx") == 0 }}
				r = b.proc.Process(context.Background(), msg("2", deposit), h)
				require.Equal(t, process.Retry, r.Action)
				require.ErrorIs(t, r.Err, process.ErrNotHeld)
				require.Equal(t, 1, f.count("tx"), "one attempt, no retry")
				require.Empty(t, b.account(t, "a1"))

				// Held throughout: applied, as ever.
				r = b.proc.Process(context.Background(), msg("3", deposit), process.Hooks{Held: func() bool { return true }})
				require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
				require.True(t, r.Applied)
			})
		})
	}
}

// TestClaimGivenBackWhenNotHeld: a claim made after the message's
// visibility passed (its request went out late: a process frozen at the
// call) is released at once, the effect not run: another consumer may have
// the message, and would otherwise find this claim busy for a whole lease
// (a worker thawed into its claim blocks the group's next receive).
func TestClaimGivenBackWhenNotHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := withFaults(t, b)
	ran := false
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		ran = true
		return effect.Output{}, nil
	}
	h := process.Hooks{Held: func() bool { return f.count("claim") == 0 }} // held until the claim went out
	r := b.proc.Process(context.Background(), msg("1", deposit), h)
	require.Equal(t, process.Retry, r.Action)
	require.ErrorIs(t, r.Err, process.ErrNotHeld)
	require.False(t, ran, "the effect must not run")
	require.Equal(t, 1, f.count("claim"))

	// The next delivery claims at once: nothing stands in its way.
	r = b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
	require.Equal(t, dedup.Won, r.Outcome)
	require.True(t, ran)
}
