package sim

import (
	"context"
	"fmt"

	"github.com/exactlyonce/exactly/effect"
)

// Two corners the swarm never drew before the reviewer's planted bugs of
// docs/TESTING.md ("The reviewer's second set") showed them blind:
//
// Carried mode. In a third of the guarded worlds (Q1's ledger writes its
// entry item; 24 h TTL), every pool incarnation commits Q1 in carried mode
// (exactly.CommitCarried): the ledger's entry item ("entry#<dedup key>",
// write 1) carries the COMPLETED record, and the dedup table holds none.
// DESIGN.md forbids mixing it with the other modes on one queue, so the
// whole queue switches; its redrive brings copies back that the carrier
// finds duplicates. The record's key, as the simulation's checks see it, is
// the carrier's pk: byKey maps it to its message too.
//
// Mixed fingerprints. In one world of six, each process (pool incarnation,
// Lambda environment) draws its own Config.PayloadHash, the whole body or
// selected JSON fields, as during a deploy that changes it: records then
// meet fingerprints of another kind, which cannot tell a conflict
// (dedup.Comparable) and must be taken as duplicates. Those worlds send no
// conflict message (a conflict across kinds is a duplicate by design, so the
// run could not tell a lost conflict from a right one).

// carriedWorld reports whether seed's world commits Q1 in carried mode.
// Only a guarded world (its entry item kept) has a carrier.
func carriedWorld(seed uint64) bool { return guardedWorld(seed) && hash64(seed, "carried")%3 == 0 }

// guardedWorld: Q1's ledger writes its entry item (attribute_not_exists)
// too, in half of the worlds whose records keep the 24 h TTL.
func guardedWorld(seed uint64) bool { return hash64(seed, "guarded")%2 == 0 && !ttlWorld(seed) }

// carrierPrefix is the ledger entry's key prefix (builtin.Ledger): in
// carried mode, the record's item is "entry#<dedup key>".
const carrierPrefix = "entry#"

// carriedLedger is Q1's effect in carried mode: the sim's ledger function,
// whose write 1 is the entry (builtin.Ledger.Carrier).
type carriedLedger struct{ effect.WritesFunc }

// Carrier names the entry.
func (carriedLedger) Carrier() int { return 1 }

var _ effect.CarriesRecord = carriedLedger{}

// q1Effect is Q1's effect and commit mode for a pool incarnation: carried
// in a carried world, else optimistic (half of those with group commit) or
// transactional, by incarnation.
func (w *world) q1Effect(p *proc, fn func(context.Context, effect.Input) (effect.Output, error)) (effect.Effect, string, bool) {
	switch {
	case w.shape.Carried:
		w.stat("pool: carried incarnations", 1)
		return carriedLedger{effect.WritesFunc(fn)}, "carried", false
	case hash64(w.cfg.Seed, "optimistic", p.id)%2 == 0:
		w.stat("pool: transactional incarnations", 1)
		return effect.WritesFunc(fn), "transactional", false
	}
	w.stat("pool: optimistic incarnations", 1)
	group := w.groupCommits(p.id)
	if group {
		w.stat("pool: group-commit incarnations", 1)
	}
	return effect.WritesFunc(fn), "optimistic", group
}

// groupCommits: process id's Q1 worker, if optimistic, commits in groups.
// In the limits' worlds three optimistic incarnations in four do, so that
// limit commits meet in one (limits.go).
func (w *world) groupCommits(id string) bool {
	g := hash64(w.cfg.Seed, "group", id) % 4
	return g%2 == 0 || (g == 1 && w.shape.Limits)
}

// carrierKeys maps each carrier's key to its message, in a carried world.
func (w *world) carrierKeys() {
	if !w.shape.Carried {
		return
	}
	for _, s := range w.msgs {
		if !s.conflict {
			w.byKey[carrierPrefix+s.key] = s
		}
	}
}

// payloadOf is process id's Config.PayloadHash: the world's, or in a world
// of mixed fingerprints one drawn per process.
func (w *world) payloadOf(id string) string {
	if !w.shape.MixedPayload {
		return w.shape.Payload
	}
	k := payloadKinds[hash64(w.cfg.Seed, "payload of", id)%uint64(len(payloadKinds))]
	w.stat(fmt.Sprintf("sim: processes fingerprinting %s (mixed)", k), 1)
	return k
}

// payloadKinds are the fingerprints the swarm draws from.
var payloadKinds = []string{"body", "json:/account,/amount_cents"}
