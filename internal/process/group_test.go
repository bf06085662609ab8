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
// results in order.
func processAll(b *bundle, msgs ...effect.Message) []process.Result {
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
