package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/cli"
)

func TestPlanShape(t *testing.T) {
	t.Parallel()
	cfg := PlanConfig{Deposits: 2000, Groups: 40, ExactPct: 5, RetryPct: 5, Poison: 4, Sleepers: 6, SleepMS: 9000}
	p := NewPlan(cfg, 99)
	require.Equal(t, p, NewPlan(cfg, 99), "the same seed gives the same plan")
	require.NotEqual(t, p.Sends, NewPlan(cfg, 100).Sends)

	require.Len(t, p.Deposits, 2000)
	require.Len(t, p.Groups, 40)
	require.Len(t, p.Poison, 4)
	require.Equal(t, 6, p.Sleepers())
	require.InDelta(t, 100, p.Count(ExactResend), 40)
	require.InDelta(t, 100, p.Count(Retry), 40)
	require.Equal(t, 2000, p.Count(Original))
	require.Equal(t, 4, p.Count(Poison))

	next := map[string]int64{}
	sentDedup := map[string]bool{}
	poisonGroups := map[string]bool{}
	for _, s := range p.Sends {
		switch s.Kind {
		case Original:
			d := p.Deposits[s.Deposit]
			next[d.Group]++
			require.Equal(t, next[d.Group], d.Seq, "seqs of a group are sent 1..n in order")
			require.False(t, sentDedup[s.DedupID])
			sentDedup[s.DedupID] = true
			e, err := builtin.ParseLedgerEntry(s.Body)
			require.NoError(t, err)
			require.Equal(t, d.Group, e.Account)
			require.Equal(t, d.Amount, *e.AmountCents)
			require.Equal(t, d.Seq, *e.Seq)
		case ExactResend:
			require.True(t, sentDedup[s.DedupID], "an exact resend follows its original")
			require.Equal(t, p.Deposits[s.Deposit].DedupID, s.DedupID)
		case Retry:
			d := p.Deposits[s.Deposit]
			require.LessOrEqual(t, d.Seq, next[d.Group], "a retry follows its original")
			require.False(t, sentDedup[s.DedupID], "a retry has a new dedup id")
			sentDedup[s.DedupID] = true
			require.Equal(t, d.Key, s.Key)
			require.Equal(t, d.Body, s.Body, "same key, same payload: a duplicate, not a conflict")
		case Poison:
			require.False(t, poisonGroups[s.Group], "one poison message per group")
			poisonGroups[s.Group] = true
			_, err := builtin.ParseLedgerEntry(s.Body)
			require.Error(t, err, "the ledger rejects poison")
		}
		if s.Kind != Poison {
			require.Equal(t, p.Deposits[s.Deposit].Group, s.Group)
		}
	}
	for _, g := range p.Groups {
		require.False(t, poisonGroups[g])
	}
}

func TestPlanFewerDepositsThanGroups(t *testing.T) {
	t.Parallel()
	p := NewPlan(PlanConfig{Deposits: 3, Groups: 10}, 1)
	require.Len(t, p.Deposits, 3)
	require.LessOrEqual(t, len(p.Groups), 3)
}

type recordEffect struct{ calls int }

func (r *recordEffect) Apply(context.Context, effect.Input) (effect.Output, error) {
	r.calls++
	return effect.Output{Result: []byte("applied")}, nil
}

func TestSleepyLedger(t *testing.T) {
	t.Parallel()
	inner := &recordEffect{}
	s := &SleepyLedger{Ledger: inner}
	in := func(body string) effect.Input { return effect.Input{Message: effect.Message{Body: body}, Key: "k"} }

	start := time.Now()
	out, err := s.Apply(context.Background(), in(`{"account":"a","amount_cents":1,"sleep_ms":150}`))
	require.NoError(t, err)
	require.Equal(t, "applied", string(out.Result))
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// A cancelled handler stops sleeping and applies nothing: retryable.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = s.Apply(ctx, in(`{"account":"a","amount_cents":1,"sleep_ms":60000}`))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, effect.IsPermanent(err))
	require.Equal(t, 1, inner.calls)

	// No sleep_ms, or a body that is not JSON: straight to the ledger.
	_, err = s.Apply(context.Background(), in(`{"account":"a","amount_cents":1}`))
	require.NoError(t, err)
	_, err = s.Apply(context.Background(), in(`not json`))
	require.NoError(t, err)
	require.Equal(t, 3, inner.calls)

	// The real ledger ignores sleep_ms.
	l, err := NewSleepyLedger(cli.Env{LedgerTable: "ledger"})
	require.NoError(t, err)
	o, err := l.Apply(context.Background(), in(`{"account":"a","amount_cents":7,"seq":2,"sleep_ms":1}`))
	require.NoError(t, err)
	require.Len(t, o.Writes, 2)
	_, err = l.Apply(context.Background(), in(`{"account":"a","amount_cents":"lots","seq":1}`))
	require.True(t, effect.IsPermanent(err))
	_, err = NewSleepyLedger(cli.Env{})
	require.Error(t, err)
}
