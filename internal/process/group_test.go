package process_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// grouped sets b up in optimistic mode with group commit, the ledger
// effect, its table behind a faultDB.
func grouped(t *testing.T) (*bundle, *faultDB) {
	b, f := optimistic(t)
	b.proc.Group = &process.GroupCommitter{Store: b.store, Window: 5 * time.Millisecond}
	return b, f
}

// processAll handles msgs at once, one goroutine each, and returns their
// results in order. Their effects take 1ms (virtual time in a synctest
// bubble): all of them are under way before any commits, so a group commit
// gathers them all.
func processAll(b *bundle, msgs ...effect.Message) []process.Result {
	fn := b.effect
	defer func() { b.effect = fn }()
	b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
		time.Sleep(time.Millisecond)
		return fn(ctx, in)
	}
	out := make([]process.Result, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() { out[i] = b.proc.Process(context.Background(), m, process.Hooks{}) })
	}
	wg.Wait()
	return out
}

func depositMsg(id, account string, cents int) effect.Message {
	return msg(id, fmt.Sprintf(`{"account":%q,"amount_cents":%d}`, account, cents))
}

func balance(t *testing.T, b *bundle, account string) string {
	t.Helper()
	v, _ := b.account(t, account)["balance_cents"].(*types.AttributeValueMemberN)
	if v == nil {
		return ""
	}
	return v.Value
}

// TestGroupCommitOneRequest: commits ready within the window go to
// DynamoDB in one transaction, and each is applied.
func TestGroupCommitOneRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		var msgs []effect.Message
		for i := range 8 {
			msgs = append(msgs, depositMsg(fmt.Sprint(i), fmt.Sprint("a", i), 100+i))
		}
		for i, r := range processAll(b, msgs...) {
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.True(t, r.Applied)
			require.Equal(t, fmt.Sprint(100+i), balance(t, b, fmt.Sprint("a", i)))
		}
		require.Equal(t, 1, f.count("tx"), "one transaction for all")
		// Alone in its window: its own transaction, as without grouping.
		r := b.proc.Process(context.Background(), depositMsg("x", "solo", 7), process.Hooks{})
		require.True(t, r.Applied, "err: %v", r.Err)
		require.Equal(t, "7", balance(t, b, "solo"))
		require.Equal(t, 2, f.count("tx"))
	})
}

// TestGroupCommitVerdictsAreEach: a duplicate, a conflict and an effect
// whose condition fails cancel the shared transaction; each gets its own
// verdict, and the commits whose items passed are retried alone at once and
// applied, once.
func TestGroupCommitVerdictsAreEach(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		require.True(t, b.proc.Process(context.Background(), depositMsg("d", "a0", 5), process.Hooks{}).Applied)
		seqd := msg("s", `{"account":"s1","amount_cents":1,"seq":3}`)
		require.Equal(t, process.Delete, b.proc.Process(context.Background(), seqd, process.Hooks{}).Action)
		before := f.count("tx")

		start := time.Now()
		rs := processAll(b,
			depositMsg("d", "a0", 5),                                    // a duplicate of the first
			depositMsg("d", "a0", 99),                                   // the same key, another payload: a conflict
			msg("old-seq", `{"account":"s1","amount_cents":1,"seq":2}`), // the account's condition fails
			depositMsg("n1", "a1", 10),
			depositMsg("n2", "a2", 20),
		)
		require.Less(t, time.Since(start), 100*time.Millisecond, "no backoff for the innocent")
		// The duplicate and the conflict share a record: one of them went
		// alone, so which one met the group is the scheduler's; both
		// verdicts stand either way.
		require.Equal(t, dedup.Duplicate, rs[0].Outcome)
		require.Equal(t, process.Delete, rs[0].Action)
		require.Equal(t, dedup.Conflict, rs[1].Outcome)
		require.Equal(t, process.Fail, rs[1].Action)
		var ece *dedup.EffectConditionError
		require.ErrorAs(t, rs[2].Err, &ece)
		require.Equal(t, process.Fail, rs[2].Action)
		for _, r := range rs[3:] {
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
			require.True(t, r.Applied)
		}
		require.Equal(t, "5", balance(t, b, "a0"))
		require.Equal(t, "10", balance(t, b, "a1"))
		require.Equal(t, "20", balance(t, b, "a2"))
		require.Equal(t, "1", balance(t, b, "s1"))
		require.LessOrEqual(t, f.count("tx")-before, 6, "one shared try, then each alone at most once")
	})
}

// TestGroupCommitOneItemTwice: two deposits to one account go in separate
// transactions (DynamoDB refuses two operations on one item in one), and
// both are applied.
func TestGroupCommitOneItemTwice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		rs := processAll(b, depositMsg("1", "hot", 1), depositMsg("2", "hot", 2), depositMsg("3", "cold", 3))
		for _, r := range rs {
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		}
		require.Equal(t, "3", balance(t, b, "hot"))
		require.Equal(t, "3", balance(t, b, "cold"))
		require.Equal(t, 2, f.count("tx"), "the second deposit to hot went alone; cold joined a group")
	})
}

// TestGroupCommitLostResponse: the shared transaction took effect and its
// answer was lost (or failed before taking effect): each commit is retried
// alone with its token, recognised as its own or made, applied once.
func TestGroupCommitLostResponse(t *testing.T) {
	t.Parallel()
	for _, ft := range []fault{loseResponse, failBefore, txConflict} {
		t.Run(fmt.Sprint(ft), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b, f := grouped(t)
				f.inject("tx", ft)
				rs := processAll(b, depositMsg("1", "a1", 1), depositMsg("2", "a2", 2), depositMsg("3", "a3", 3))
				for i, r := range rs {
					require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
					require.True(t, r.Applied)
					require.Equal(t, fmt.Sprint(i+1), balance(t, b, fmt.Sprint("a", i+1)), "applied once")
				}
				require.Equal(t, 4, f.count("tx"), "the group, then each alone")
			})
		})
	}
}

// slowEffects makes b's effect take took[m.ID] (virtual time) before the
// ledger's, and fail for the IDs in fail.
func slowEffects(b *bundle, took map[string]time.Duration, fail map[string]bool) {
	ledger := b.effect
	b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
		time.Sleep(took[in.Message.ID])
		if fail[in.Message.ID] {
			return effect.Output{}, effect.Permanent(fmt.Errorf("refused"))
		}
		return ledger(ctx, in)
	}
}

// TestGroupCommitClosesWhenAllHaveJoined: once every commit under way has
// joined, the group's transaction goes at once, without waiting out the
// window; a straggler is waited for no longer than the window, and then
// commits alone as soon as it is ready (nobody else is under way).
func TestGroupCommitClosesWhenAllHaveJoined(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		start := time.Now()
		var msgs []effect.Message
		for i := range 4 {
			msgs = append(msgs, depositMsg(fmt.Sprint(i+1), fmt.Sprint("a", i+1), 10))
		}
		for _, r := range processAll(b, msgs...) { // effects of 1ms
			require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		}
		require.Equal(t, time.Millisecond, time.Since(start), "all four joined at 1ms: no wait for the 5ms window")
		require.Equal(t, 1, f.count("tx"))

		// One straggler: the others go when the window ends, it goes alone
		// the moment it is ready.
		slowEffects(b, map[string]time.Duration{"s": 20 * time.Millisecond, "5": time.Millisecond, "6": time.Millisecond}, nil)
		start = time.Now()
		var fast [2]time.Duration
		var wg sync.WaitGroup
		for i, m := range []effect.Message{depositMsg("5", "a5", 1), depositMsg("6", "a6", 1)} {
			wg.Go(func() {
				require.True(t, b.proc.Process(context.Background(), m, process.Hooks{}).Applied)
				fast[i] = time.Since(start)
			})
		}
		r := b.proc.Process(context.Background(), depositMsg("s", "slow", 1), process.Hooks{})
		wg.Wait()
		require.True(t, r.Applied, "err: %v", r.Err)
		require.Equal(t, [2]time.Duration{6 * time.Millisecond, 6 * time.Millisecond}, fast, "joined at 1ms, bounded by the 5ms window")
		require.Equal(t, 20*time.Millisecond, time.Since(start), "the straggler, alone, commits at once")
		require.Equal(t, 3, f.count("tx"))
	})
}

// TestGroupCommitClosesWhenTheRestGoElsewhere: a message under way whose
// effect fails (it goes the claimed way, never joining) lets the group go
// at once instead of at the window's end.
func TestGroupCommitClosesWhenTheRestGoElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		slowEffects(b, map[string]time.Duration{"1": time.Millisecond, "2": time.Millisecond, "bad": 2 * time.Millisecond}, map[string]bool{"bad": true})
		start := time.Now()
		var took [2]time.Duration
		var wg sync.WaitGroup
		for i, m := range []effect.Message{depositMsg("1", "a1", 1), depositMsg("2", "a2", 1)} {
			wg.Go(func() {
				require.True(t, b.proc.Process(context.Background(), m, process.Hooks{}).Applied)
				took[i] = time.Since(start)
			})
		}
		r := b.proc.Process(context.Background(), depositMsg("bad", "b", 1), process.Hooks{})
		wg.Wait()
		require.Equal(t, process.Fail, r.Action)
		require.Equal(t, [2]time.Duration{2 * time.Millisecond, 2 * time.Millisecond}, took, "the group went when the failing effect returned")
		require.Equal(t, 1, f.count("tx"))
	})
}

// TestGroupCommitPipelined: a message whose caller takes its slot back
// while it commits (Hooks.Yield) is told once, when its commit joins the
// group, and only then; a group waits for the pipelined effects that
// began before it opened, not for one that began after (its caller ran it
// on the slot given back): that one commits in a group of its own.
func TestGroupCommitPipelined(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, f := grouped(t)
		slowEffects(b, map[string]time.Duration{"a": time.Millisecond, "b": 3 * time.Millisecond, "late": 10 * time.Millisecond}, nil)
		start := time.Now()
		var mu sync.Mutex
		yields := map[string][]time.Duration{}
		took := map[string]time.Duration{}
		run := func(id, account string) {
			h := process.Hooks{Yield: func() {
				mu.Lock()
				defer mu.Unlock()
				yields[id] = append(yields[id], time.Since(start))
			}}
			r := b.proc.Process(context.Background(), depositMsg(id, account, 1), h)
			require.True(t, r.Applied, "%s: %v", id, r.Err)
			mu.Lock()
			defer mu.Unlock()
			took[id] = time.Since(start)
		}
		var wg sync.WaitGroup
		wg.Go(func() { run("a", "a1") })
		wg.Go(func() { run("b", "b1") })
		time.Sleep(2 * time.Millisecond) // a's group is open, waiting for b
		wg.Go(func() { run("late", "l1") })
		wg.Wait()
		require.Equal(t, map[string][]time.Duration{"a": {time.Millisecond}, "b": {3 * time.Millisecond}, "late": {12 * time.Millisecond}}, yields, "each told once, as its commit joined")
		require.Equal(t, map[string]time.Duration{"a": 3 * time.Millisecond, "b": 3 * time.Millisecond, "late": 12 * time.Millisecond}, took,
			"a's group went when b joined, without waiting for the late effect")
		require.Equal(t, 2, f.count("tx"), "a and b together, then late alone")

		// An effect that fails goes the claimed way: its caller is never
		// told to yield (its effect runs again).
		slowEffects(b, nil, map[string]bool{"bad": true})
		yielded := false
		r := b.proc.Process(context.Background(), depositMsg("bad", "x", 1), process.Hooks{Yield: func() { yielded = true }})
		require.Equal(t, process.Fail, r.Action)
		require.False(t, yielded)
	})
}
