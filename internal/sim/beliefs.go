package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/exactly"
)

// Beliefs (issue 19: F4 and B1 of the reviewer's second set). A worker acts
// on deadlines it believes in: a claim's lease end (its effect's context
// ends a margin before it, its heartbeat is timed from it) and a message's
// visibility deadline (the pool starts, runs and commits a delivery only
// before it). A bug that moves one of them later by a little, after a rare
// answer, seldom shows in an outcome: the margins cover it, or nobody else
// happened to take the message meanwhile. So each belief is held against
// the truth, as TigerBeetle's simulator holds a replica's view against the
// cluster's, when the worker comes to count on it (exactly.Config.Test's
// OnLease and OnVisibility): at a claim's answer, at each confirmed lease
// extension, at each receive and each confirmed visibility extension.
// Later moments need no check of their own: a belief changes only then,
// and what the fakes hold for a token or a receipt only grows meanwhile
// (a release or a hand-back ends the belief first).
//
// - Lease: the end the processor counts on for a claim is never later
//   than the record's lease_until under the claim's token, as the ledger
//   last took it (a claim's put or an extension that took effect, whatever
//   became of its answer). Both are on the claimant's own ledger clock, so
//   the clocks' skew plays no part; the ledger keeps milliseconds, so a
//   belief may pass the record by less than one (leaseSlack).
// - Visibility: the deadline the pool counts on for a receipt is never
//   later than SQS's for it (what the fake granted at the receive and at
//   each extension it applied: holes.go), exactly: both are on the
//   runtime's clock, and the pool dates a deadline from before the request
//   that SQS counts it from.

// The answer's way back. Every other call of the simulation answers at
// the virtual instant it took effect, so a deadline dated at the answer
// instead of the request (B1) was dated right. A visibility change's
// answer comes back 1 to 30 ms after SQS applied it (a round trip's
// second half), drawn from the seed and the call: an extension the pool
// dated at its answer then counts on more than SQS gave. The pool's
// keeper sends few of them (one batch per queue and round), so this costs
// nothing measurable.
const answerLatency = 30 * time.Millisecond

// answerTakesTime holds a visibility change's answer on its way back (the
// call's ctx bounds it, as a slow answer's: fault.go).
func (w *world) answerTakesTime(ctx context.Context, id string) {
	t := time.NewTimer(time.Millisecond + time.Duration(hash64(w.cfg.Seed, id, "answer")%uint64(answerLatency-time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// leaseSlack: the record keeps lease_until in whole milliseconds (rounded
// down) of the end the claim or extension computed.
const leaseSlack = time.Millisecond

// believe hands p's beliefs to the checks below through t.
func (w *world) believe(t *exactly.TestConfig, p *proc) {
	t.OnLease = func(key, token string, until time.Time) { w.checkLeaseBelief(p, key, token, until) }
	t.OnVisibility = func(receipt string, until time.Time) { w.checkVisibilityBelief(p, receipt, until) }
}

// leaseTaken: the ledger took lease_until (ms) for tok (fence.go's
// boundary, after the write applied).
func (w *world) leaseTaken(tok string, ms int64) {
	if tok == "" {
		return
	}
	x := w.wide
	x.mu.Lock()
	x.tokLease[tok] = ms
	x.mu.Unlock()
}

// checkLeaseBelief: p counts on the claim of key under tok lasting until.
func (w *world) checkLeaseBelief(p *proc, key, tok string, until time.Time) {
	x := w.wide
	x.mu.Lock()
	ms, ok := x.tokLease[tok]
	x.mu.Unlock()
	lid := -1
	if s := w.byKey[key]; s != nil {
		lid = s.lid
	}
	if !ok {
		w.violate("belief: %s counts on a lease of %s (logical %d) under token %.8s, which the ledger never took; faults of %s: %s",
			p.id, key, lid, tok, p.id, w.faultsBy(p.id, 0, time.Since(w.start)))
		return
	}
	truth := time.UnixMilli(ms)
	if ahead := until.Sub(truth); ahead >= leaseSlack {
		w.violate("belief: a lease believed longer than the ledger's: %s counts on its claim of %s (logical %d) under token %.8s until %s after the record's lease_until (on its own clock); faults of %s: %s",
			p.id, key, lid, tok, ahead, p.id, w.faultsBy(p.id, 0, time.Since(w.start)))
		return
	}
	w.stat("sim: lease beliefs checked against the ledger", 1)
}

// checkVisibilityBelief: p's pool counts on holding receipt until.
func (w *world) checkVisibilityBelief(p *proc, receipt string, until time.Time) {
	if !strings.HasPrefix(p.id, "w") {
		return
	}
	believed := until.Sub(w.start)
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.receipts[receipt]
	if r == nil {
		w.stats["sim: visibility beliefs of receipts SQS granted no visibility to"]++
		return
	}
	if believed <= r.until {
		w.stats["sim: visibility beliefs checked against SQS"]++
		return
	}
	w.violations = append(w.violations, fmt.Sprintf("+%s belief: a visibility believed longer than SQS's: %s counts on holding message %s (logical %d) until +%s, %s after SQS's deadline for its receipt; faults of %s: %s; its story: %s",
		time.Since(w.start).Round(time.Millisecond), p.id, r.msgID, r.lid, believed, believed-r.until, p.id, w.faultsBy(p.id, 0, time.Since(w.start)), strings.Join(w.trace[r.lid], " | ")))
}
