package dedupcontract

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// The optimistic commit: no claim; the COMPLETED record and the effect's
// writes in one request, on the claim's own condition.

// commit runs CommitOptimistic and checks the outcome.
func (f *fixture) commit(st *dedup.Store, r dedup.ClaimRequest, result []byte, writes []types.TransactWriteItem, want dedup.Outcome) dedup.Claim {
	f.t.Helper()
	c, err := st.CommitOptimistic(f.ctx, r, result, writes)
	require.NoError(f.t, err, "commit %s", r.Key)
	require.Equal(f.t, want, c.Outcome, "commit %s", r.Key)
	return c
}

func (s *suite) testOptimisticApplies(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	t0 := f.clock.Now()
	body := `{"account":"a1","amount_cents":250,"seq":1}`
	r := f.req("k", body, lease, ttl)
	r.Attempts = 2
	c := f.commit(f.store(), r, []byte("done"), ledgerWrites(t, ledger, "k", body), dedup.Won)
	require.Len(t, c.Token, 32)
	require.Nil(t, c.Record)

	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusCompleted, attrS(it, dedup.AttrStatus))
	require.Equal(t, c.Token, attrS(it, dedup.AttrToken))
	require.Equal(t, hash(body), attrS(it, dedup.AttrPayloadSHA256))
	require.Equal(t, "m-"+body, attrS(it, dedup.AttrMessageID))
	require.Equal(t, "g1", attrS(it, dedup.AttrGroup))
	require.Equal(t, "2", attrN(it, dedup.AttrAttempts))
	require.Equal(t, ms(t0), attrN(it, dedup.AttrCreatedAt))
	require.Equal(t, ms(t0), attrN(it, dedup.AttrCompletedAt))
	require.Equal(t, sec(t0.Add(ttl)), attrN(it, dedup.AttrExpiresAt))
	acct := f.item(ledger, "acct#a1")
	require.Equal(t, "250", attrN(acct, "balance_cents"))
	require.Equal(t, "1", attrN(acct, "applied"))
	require.NotNil(t, f.item(ledger, "entry#k"))

	// A claim-mode worker sees it as any completed record: a duplicate
	// with the stored result.
	d := f.claim(f.store(), f.req("k", body, lease, ttl), dedup.Duplicate)
	require.Equal(t, []byte("done"), d.Record.Result)

	// Without writes, the record alone (a PutItem).
	f.commit(f.store(), f.req("k2", "b2", lease, ttl), nil, nil, dedup.Won)
	require.Equal(t, dedup.StatusCompleted, attrS(f.item(f.table, "k2"), dedup.AttrStatus))
	require.NotContains(t, f.item(f.table, "k2"), dedup.AttrResult)
}

// testOptimisticBlocked: a completed record (same or other payload) or a
// live claim blocks the commit, which applies nothing and says why, with
// the record, as a claim would.
func (s *suite) testOptimisticBlocked(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	body := `{"account":"a1","amount_cents":100}`
	f.commit(f.store(), f.req("k", body, lease, ttl), []byte("first"), ledgerWrites(t, ledger, "k", body), dedup.Won)
	before, acct := f.snapshot("k"), Render(f.item(ledger, "acct#a1"))
	for _, writes := range [][]types.TransactWriteItem{nil, ledgerWrites(t, ledger, "k", body)} {
		d := f.commit(f.store(), f.req("k", body, lease, ttl), []byte("second"), writes, dedup.Duplicate)
		require.Equal(t, []byte("first"), d.Record.Result)
		require.Empty(t, d.Token)
		x := f.commit(f.store(), f.req("k", "other", lease, ttl), nil, writes, dedup.Conflict)
		require.Equal(t, hash(body), x.Record.PayloadSHA256)
	}
	require.Equal(t, before, f.snapshot("k"), "a blocked commit changed the record")
	require.Equal(t, acct, Render(f.item(ledger, "acct#a1")), "a blocked commit applied its writes")

	// A live claim of a claim-mode worker: busy, with its remaining lease.
	a := f.store()
	c := f.claim(a, f.req("live", body, lease, ttl), dedup.Won)
	f.clock.Advance(10 * time.Second)
	b := f.commit(f.store(), f.req("live", body, lease, ttl), nil, ledgerWrites(t, ledger, "live", body), dedup.Busy)
	require.Equal(t, lease-10*time.Second, b.Remaining)
	require.Nil(t, f.item(ledger, "entry#live"))
	// Once its lease has ended, the commit takes the key over; the
	// claim-mode worker's commit is then refused and applies nothing.
	f.clock.Advance(lease)
	f.commit(f.store(), f.req("live", body, lease, ttl), nil, ledgerWrites(t, ledger, "live", body), dedup.Won)
	require.ErrorIs(t, a.CompleteTx(f.ctx, c, nil, ttl, ledgerWrites(t, ledger, "live", body)), dedup.ErrLeaseLost)
	require.Equal(t, "200", attrN(f.item(ledger, "acct#a1"), "balance_cents"))

	// A completed record whose TTL has passed is absent.
	f.clock.Advance(ttl + time.Minute)
	f.commit(f.store(), f.req("k", body, lease, ttl), nil, nil, dedup.Won)
}

// testOptimisticLostResponse: a commit whose response is lost is recognised
// by its token on the retry: Won again, applied once.
func (s *suite) testOptimisticLostResponse(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	for _, seq := range []string{"", `,"seq":9`} {
		key := "k" + seq
		body := `{"account":"a1","amount_cents":100` + seq + `}`
		lr := &lostResponse{API: f.db}
		twice := dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now))
		r := f.req(key, body, lease, ttl)
		c := f.commit(twice, r, []byte("r"), ledgerWrites(t, ledger, key, body), dedup.Won)
		require.Equal(t, 1, lr.calls["TransactWriteItems"])
		// The caller's own retry, with the first try's token.
		r.Token = c.Token
		f.commit(f.store(), r, []byte("r"), ledgerWrites(t, ledger, key, body), dedup.Won)
		// Another token is another worker: a duplicate.
		r.Token = ""
		f.commit(f.store(), r, []byte("r"), ledgerWrites(t, ledger, key, body), dedup.Duplicate)
	}
	require.Equal(t, "200", attrN(f.item(ledger, "acct#a1"), "balance_cents"), "a retried commit applied the effect twice")
	require.Equal(t, "2", attrN(f.item(ledger, "acct#a1"), "applied"))

	// The PutItem path too.
	lr := &lostResponse{API: f.db}
	c := f.commit(dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now)), f.req("p", "b", lease, ttl), nil, nil, dedup.Won)
	require.Equal(t, 1, lr.calls["PutItem"])
	require.Equal(t, c.Token, attrS(f.item(f.table, "p"), dedup.AttrToken))
}

// testOptimisticVerdicts: an effect write that fails its own condition, or
// a request DynamoDB rejects, applies nothing and writes no record.
func (s *suite) testOptimisticVerdicts(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a := f.store()
	f.commit(a, f.req("k1", "b1", lease, ttl), nil, ledgerWrites(t, ledger, "k1", `{"account":"a1","amount_cents":100,"seq":5}`), dedup.Won)
	acct := Render(f.item(ledger, "acct#a1"))
	_, err := a.CommitOptimistic(f.ctx, f.req("k2", "b2", lease, ttl), nil, ledgerWrites(t, ledger, "k2", `{"account":"a1","amount_cents":100,"seq":5}`))
	var ece *dedup.EffectConditionError
	require.ErrorAs(t, err, &ece)
	require.Equal(t, 0, ece.Index)
	require.Nil(t, f.item(f.table, "k2"), "a cancelled commit wrote its record")
	require.Equal(t, acct, Render(f.item(ledger, "acct#a1")))

	w := ledgerWrites(t, ledger, "k3", `{"account":"a1","amount_cents":1}`)
	_, err = a.CommitOptimistic(f.ctx, f.req("k3", "b3", lease, ttl), nil, append(w, w[0]))
	require.ErrorIs(t, err, dedup.ErrInvalid)
	require.Nil(t, f.item(f.table, "k3"))

	_, err = a.CommitOptimistic(f.ctx, f.req("k4", "b4", lease, ttl), make([]byte, dedup.MaxStoredBytes+1), nil)
	require.ErrorIs(t, err, dedup.ErrResultTooLarge)
	for _, r := range []dedup.ClaimRequest{
		{Key: "", PayloadSHA256: hash("b"), TTL: ttl},
		{Key: "k5", PayloadSHA256: hash("b"), TTL: 0},
		{Key: "k5", PayloadSHA256: "", TTL: ttl},
	} {
		_, err := a.CommitOptimistic(f.ctx, r, nil, nil)
		require.Error(t, err, "%+v", r)
	}
	require.Nil(t, f.item(f.table, "k4"))
	require.Nil(t, f.item(f.table, "k5"))
}

// testOptimisticRace: many workers commit the same message's writes at
// once, round after round: exactly one applies them; every other is told
// duplicate, or fails without a verdict (TransactionConflict) and is told
// duplicate when it tries again.
func (s *suite) testOptimisticRace(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	g, rounds := s.opts.RaceGoroutines, max(s.opts.RaceRounds/3, 5)
	for round := 0; round < rounds; round++ {
		key := fmt.Sprint("race-", round)
		body := fmt.Sprintf(`{"account":"r%d","amount_cents":10}`, round)
		writes := ledgerWrites(t, ledger, key, body) // on the test's goroutine: it may fail the test
		start := make(chan struct{})
		outcomes := make([]dedup.Outcome, g)
		var wg sync.WaitGroup
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				st := f.store()
				r := f.req(key, body, lease, ttl)
				tok, err := dedup.NewToken()
				if err != nil {
					t.Error(err)
					return
				}
				r.Token = tok // kept across tries, as the processor keeps it
				for try := 0; try < 50; try++ {
					c, err := st.CommitOptimistic(f.ctx, r, nil, writes)
					if err == nil {
						outcomes[i] = c.Outcome
						return
					}
					if errors.Is(err, dedup.ErrInvalid) {
						t.Errorf("round %d: %v", round, err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, o := range outcomes {
			switch o {
			case dedup.Won:
				won++
			case dedup.Duplicate:
			default:
				t.Fatalf("round %d, worker %d: outcome %v", round, i, o)
			}
		}
		require.Equal(t, 1, won, "round %d", round)
		require.Equal(t, "10", attrN(f.item(ledger, fmt.Sprintf("acct#r%d", round)), "balance_cents"), "round %d", round)
	}
}

// testGroupCommit: several optimistic commits in one transaction commit
// together; when it is cancelled, each gets the verdict of its own items
// and the others ErrNotAlone, and nothing is applied.
func (s *suite) testGroupCommit(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	st := f.store()
	entry := func(key, body string) dedup.GroupEntry {
		tok, err := dedup.NewToken()
		require.NoError(t, err)
		r := f.req(key, body, lease, ttl)
		r.Token = tok
		return dedup.GroupEntry{Req: r, Result: []byte("r-" + key), Writes: ledgerWrites(t, ledger, key, body)}
	}
	a := entry("g1", `{"account":"a1","amount_cents":10}`)
	b := entry("g2", `{"account":"a2","amount_cents":20}`)
	out := st.CommitGroup(f.ctx, []dedup.GroupEntry{a, b})
	for i, r := range out {
		require.NoError(t, r.Err, "entry %d", i)
		require.Equal(t, dedup.Won, r.Claim.Outcome)
	}
	require.Equal(t, "10", attrN(f.item(ledger, "acct#a1"), "balance_cents"))
	require.Equal(t, "20", attrN(f.item(ledger, "acct#a2"), "balance_cents"))
	require.Equal(t, a.Req.Token, attrS(f.item(f.table, "g1"), dedup.AttrToken))

	// A duplicate of g1 (another token), a conflict on g2, a fresh g3: the
	// duplicate and the conflict get their verdicts, g3 must go alone.
	dup := entry("g1", `{"account":"a1","amount_cents":10}`)
	con := entry("g2", `{"account":"a2","amount_cents":99}`)
	fresh := entry("g3", `{"account":"a3","amount_cents":30}`)
	out = st.CommitGroup(f.ctx, []dedup.GroupEntry{dup, con, fresh})
	require.NoError(t, out[0].Err)
	require.Equal(t, dedup.Duplicate, out[0].Claim.Outcome)
	require.Equal(t, []byte("r-g1"), out[0].Claim.Record.Result)
	require.NoError(t, out[1].Err)
	require.Equal(t, dedup.Conflict, out[1].Claim.Outcome)
	require.ErrorIs(t, out[2].Err, dedup.ErrNotAlone)
	require.Nil(t, f.item(f.table, "g3"), "a cancelled group applied a commit")
	require.Equal(t, "10", attrN(f.item(ledger, "acct#a1"), "balance_cents"))
	c, err := st.CommitOptimistic(f.ctx, fresh.Req, fresh.Result, fresh.Writes)
	require.NoError(t, err)
	require.Equal(t, dedup.Won, c.Outcome)

	// Two commits writing one item: DynamoDB refuses the request as a
	// whole; neither gets a verdict, nothing is applied.
	x := entry("g4", `{"account":"hot","amount_cents":1}`)
	y := entry("g5", `{"account":"hot","amount_cents":2}`)
	require.Contains(t, st.ItemIDs(y), st.ItemIDs(x)[1], "the account item is named the same in both")
	out = st.CommitGroup(f.ctx, []dedup.GroupEntry{x, y})
	for _, r := range out {
		require.ErrorIs(t, r.Err, dedup.ErrNotAlone)
		require.NotErrorIs(t, r.Err, dedup.ErrInvalid, "no verdict on either")
	}
	require.Nil(t, f.item(ledger, "acct#hot"))

	// A group retried after a lost response: each alone recognises its own.
	lr := &lostResponse{API: f.db}
	twice := dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now))
	p, q := entry("g6", `{"account":"a6","amount_cents":6}`), entry("g7", `{"account":"a7","amount_cents":7}`)
	out = twice.CommitGroup(f.ctx, []dedup.GroupEntry{p, q})
	require.Equal(t, 1, lr.calls["TransactWriteItems"])
	for i, e := range []dedup.GroupEntry{p, q} {
		// The transport sent it twice: the second answer is a cancellation
		// (the records exist), read as each one's own commit.
		require.NoError(t, out[i].Err)
		require.Equal(t, dedup.Won, out[i].Claim.Outcome)
		c, err := st.CommitOptimistic(f.ctx, e.Req, e.Result, e.Writes)
		require.NoError(t, err)
		require.Equal(t, dedup.Won, c.Outcome)
	}
	require.Equal(t, "6", attrN(f.item(ledger, "acct#a6"), "balance_cents"))
}
