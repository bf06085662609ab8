package process_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// BenchmarkCommitModes measures, against DynamoDB Local and in one run,
// what committing one ledger deposit exactly once costs in each mode,
// against a hand-written at-least-once consumer that makes the same ledger
// writes in one TransactWriteItems and nothing else (the ceiling):
//
//	transactional: claim (PutItem), then the writes and the record in one
//	  transaction (two requests);
//	optimistic: the writes and the record in one transaction (one request);
//	grouped: optimistic commits of 16 workers gathered by a GroupCommitter
//	  (2 ms window) into shared transactions.
//
// The four run interleaved in chunks, so that the machine's load weighs on
// each alike; each reports its rate as a share of the ceiling's
// (share_of_at_least_once: 1.0 = exactly-once costs nothing more). Only the
// ratios mean anything on a shared machine.
//
// go test -run '^$' -bench CommitModes ./internal/process/ (with the stack
// up; it skips without an endpoint).
func BenchmarkCommitModes(b *testing.B) {
	db := testenv.DynamoDB(b)
	table, ledgerTable := dedupcontract.Table(b, db), dedupcontract.Table(b, db)
	st := dedup.NewStore(db, table)
	ledger := &builtin.Ledger{Table: ledgerTable}
	group := &process.GroupCommitter{Store: st, Window: 2 * time.Millisecond}
	ctx := context.Background()
	run := testenv.Name("r")
	const workers = 16

	writes := func(key string) []types.TransactWriteItem {
		out, err := ledger.Apply(ctx, effect.Input{Key: key, Message: effect.Message{ID: key, Body: fmt.Sprintf(`{"account":%q,"amount_cents":1}`, key)}})
		if err != nil {
			b.Fatal(err)
		}
		return out.Writes
	}
	req := func(key string) dedup.ClaimRequest {
		tok, _ := dedup.NewToken()
		return dedup.ClaimRequest{Key: key, PayloadSHA256: dedup.PayloadHash(key), MessageID: key, Attempts: 1,
			Lease: time.Minute, TTL: time.Hour, Token: tok}
	}
	check := func(c dedup.Claim, err error) {
		if err == nil && c.Outcome != dedup.Won {
			err = fmt.Errorf("outcome %s", c.Outcome)
		}
		if err != nil {
			b.Error(err)
		}
	}
	modes := []struct {
		name string
		do   func(key string)
		took time.Duration
	}{
		{name: "at-least-once", do: func(key string) {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes(key)})
			if err != nil {
				b.Error(err)
			}
		}},
		{name: "transactional", do: func(key string) {
			r := req(key)
			c, err := st.Claim(ctx, r)
			check(c, err)
			if err == nil {
				if err := st.CompleteTx(ctx, c, nil, time.Hour, writes(key)); err != nil {
					b.Error(err)
				}
			}
		}},
		{name: "optimistic", do: func(key string) {
			check(st.CommitOptimistic(ctx, req(key), nil, writes(key)))
		}},
		{name: "grouped", do: func(key string) {
			r := req(key)
			c, err := group.Commit(ctx, dedup.GroupEntry{Req: r, Writes: writes(key)})
			if errors.Is(err, dedup.ErrNotAlone) {
				c, err = st.CommitOptimistic(ctx, r, nil, writes(key)) // alone, as the processor retries it
			}
			check(c, err)
		}},
	}
	// The same at a duplicate share of 10 % (the chaos run's is about 10 %
	// too): every tenth commit repeats the one before it, which is in
	// flight at the same moment; a duplicate cancels a shared transaction.
	withDups := func(do func(key string, dupOK bool)) func(key string) {
		return func(key string) {
			var i int
			var base string
			if _, err := fmt.Sscanf(key[strings.LastIndexByte(key, '#')+1:], "%d", &i); err == nil && i%10 == 9 {
				base = key[:strings.LastIndexByte(key, '#')+1] + fmt.Sprint(i-1)
				do(base, true)
				return
			}
			do(key, false)
		}
	}
	checkDup := func(c dedup.Claim, err error, dupOK bool) {
		if err == nil && c.Outcome == dedup.Duplicate && dupOK {
			return
		}
		check(c, err)
	}
	modes = append(modes,
		struct {
			name string
			do   func(key string)
			took time.Duration
		}{name: "optimistic_10pct_dups", do: withDups(func(key string, dup bool) {
			c, err := st.CommitOptimistic(ctx, req(key), nil, writes(key))
			checkDup(c, err, true)
		})},
		struct {
			name string
			do   func(key string)
			took time.Duration
		}{name: "grouped_10pct_dups", do: withDups(func(key string, dup bool) {
			r := req(key)
			c, err := group.Commit(ctx, dedup.GroupEntry{Req: r, Writes: writes(key)})
			if errors.Is(err, dedup.ErrNotAlone) {
				c, err = st.CommitOptimistic(ctx, r, nil, writes(key))
			}
			checkDup(c, err, true)
		})},
	)
	parallel := func(n int, f func(i int)) time.Duration {
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					f(i)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// Warm up the emulator (JIT, connections) outside the measurement.
	for m := range modes {
		parallel(100, func(i int) { modes[m].do(fmt.Sprintf("%s#warm#%d#%d", run, m, i)) })
	}
	chunk := 16 * workers
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		for m := range modes {
			modes[m].took += parallel(n, func(i int) { modes[m].do(fmt.Sprintf("%s#%d#%d", run, m, done+i)) })
		}
	}
	ceiling := float64(b.N) / modes[0].took.Seconds()
	for _, m := range modes[1:] {
		b.ReportMetric(float64(b.N)/m.took.Seconds()/ceiling, m.name+"_share_of_at_least_once")
	}
}
