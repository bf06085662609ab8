package sim

import (
	"strings"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// Expiry (issue 19): with a TTL of 24 hours the dedup records never expired
// in a run. In a quarter of the worlds (by seed) the TTL is 90 s to 4
// minutes, so that the duplicates sent after SQS's five minutes (and some
// inside them) meet records past their expires_at that DynamoDB has not
// swept yet: memdynamo never deletes expired items (DynamoDB sweeps them
// lazily, within days), so every expired record is met as DynamoDB leaves
// it. A duplicate that meets its expired record is a new message: it is
// applied again (the run allows one more application per expired record
// met), so Q1's ledger writes no entry item then (which would refuse it).
//
// The invariants, exact on the clocks of the record's writer and of the
// claim (both in the items): a claim takes a COMPLETED record over only
// when the record is past completed_at + TTL on the claim's clock, and a
// claim on such a record is never refused as a duplicate.

// ttlWorld reports whether seed's world has short-lived records.
func ttlWorld(seed uint64) bool { return hash64(seed, "ttlworld")%4 == 0 }

// shortTTL is the records' TTL in a short-TTL world.
func shortTTL(seed uint64) time.Duration {
	return 90*time.Second + time.Duration(hash64(seed, "ttl")%150)*time.Second
}

// committedAt notes when key's record was committed (the last write that
// set its expiry).
func (w *world) committedAt(key string) {
	x := w.wide
	x.mu.Lock()
	x.commitAt[key] = time.Since(w.start)
	x.mu.Unlock()
}

// expiredUnder: a COMPLETED record (completed_at on its writer's clock) is
// past its TTL for a claim made at nowMs (on the claimer's clock), as the
// claim's condition (expires_at < now, in seconds) sees it when expires_at
// is right: completed_at + TTL, in seconds rounded down (a complete) or up
// (an optimistic commit); surely is the rounding that makes it expire
// last (up), the other the first (down).
func (w *world) expiredUnder(rec map[string]ddbtypes.AttributeValue, nowMs int64, surely bool) bool {
	end := time.UnixMilli(num(rec[dedup.AttrCompletedAt])).Add(w.wide.ttl)
	exp := end.Unix()
	if surely && end.Truncate(time.Second).Before(end) {
		exp++
	}
	return exp < time.UnixMilli(nowMs).Unix()
}

// expiredCompletedMet: p's put replaced a COMPLETED record of another token.
func (w *world) expiredCompletedMet(p *proc, key string, item, pre map[string]ddbtypes.AttributeValue) {
	w.stat("path: expired record met (completed, claimed again)", 1)
	s := w.byKey[key]
	if !w.expiredUnder(pre, num(item[dedup.AttrCreatedAt]), false) {
		x := w.wide
		x.mu.Lock()
		x.justMet[p.id+"|"+key] = false // reopened before its time
		x.mu.Unlock()
		done := time.UnixMilli(num(pre[dedup.AttrCompletedAt]))
		at := time.UnixMilli(num(item[dedup.AttrCreatedAt]))
		lid := -1
		if s != nil {
			lid = s.lid
		}
		w.violate("expiry: the COMPLETED record of %s (logical %d) was claimed again by %s %s after it completed, before its TTL (%s) ended; its expires_at says %s",
			key, lid, p.id, at.Sub(done).Round(time.Millisecond), w.wide.ttl, time.Unix(num(pre[dedup.AttrExpiresAt]), 0).Sub(done).Round(time.Second))
		return
	}
	if s == nil {
		return // a conflict message's key: nothing of its own was applied
	}
	x := w.wide
	x.mu.Lock()
	x.grants[s.lid]++
	x.justMet[p.id+"|"+key] = true // an expired record: not reopened (observeClaim)
	x.mu.Unlock()
	w.mu.Lock()
	w.tr(s.lid, "%s met its expired record and claimed it again", p.id)
	w.mu.Unlock()
}

// reopened reports (once) whether p's claim on key just replaced a
// COMPLETED record that had not expired. w.mu held.
func (w *world) reopened(p *proc, key string) bool {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	k := p.id + "|" + key
	met, over := x.justMet[k]
	delete(x.justMet, k)
	return over && !met
}

// completedBlocked: p's put was refused by a COMPLETED record: a duplicate
// or a conflict, unless the record was past its TTL.
func (w *world) completedBlocked(p *proc, key string, item, pre map[string]ddbtypes.AttributeValue) {
	// A verdict the product got, right or not (judged below).
	// Fingerprints of two kinds (mixed worlds: modes.go) tell no conflict.
	if was, is := dedup.GetS(pre, dedup.AttrPayloadSHA256), dedup.GetS(item, dedup.AttrPayloadSHA256); was != is && dedup.Comparable(was, is) {
		w.mu.Lock()
		lid, ok := w.msgLid[dedup.GetS(item, dedup.AttrMessageID)]
		w.mu.Unlock()
		if ok {
			w.permanent(p, lid, "conflict: key completed for another payload")
		}
	}
	if w.expiredUnder(pre, num(item[dedup.AttrCreatedAt]), true) {
		lid := -1
		if s := w.byKey[key]; s != nil {
			lid = s.lid
		}
		done := time.UnixMilli(num(pre[dedup.AttrCompletedAt]))
		at := time.UnixMilli(num(item[dedup.AttrCreatedAt]))
		w.violate("expiry: a record past its TTL blocked a claim: %s's put on %s (logical %d), %s after the record completed (TTL %s), was refused: an expired record DynamoDB has not swept yet must be taken as absent (record: %s, completed_at %d ms, expires_at %d s; the put's now %d ms)",
			p.id, key, lid, at.Sub(done).Round(time.Millisecond), w.wide.ttl, dedup.GetS(pre, dedup.AttrStatus), num(pre[dedup.AttrCompletedAt]), num(pre[dedup.AttrExpiresAt]), num(item[dedup.AttrCreatedAt]))
		return
	}
}

// granted: logical lid's applications so far are allowed (once, and once
// more per expired record met). w.mu held.
func (w *world) granted(lid int) bool {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	return w.applied[lid] <= 1+x.grants[lid]
}

// worldStats counts the worlds of each kind.
func (w *world) worldStats() {
	if w.wide.ttl != ttl {
		w.stat("world: short TTL (90 s to 4 min)", 1)
	}
	if !w.wide.guarded {
		w.stat("world: Q1's ledger writes no entry item (the record alone guards)", 1)
	}
}

// storyOf is lid's SQS story so far.
func (w *world) storyOf(lid int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.trace[lid], " | ")
}

// leaseWithinExpiry: an IN_PROGRESS record's expires_at (seconds) never
// falls before its lease_until (ms), as a claim or an extension that took
// effect wrote them: a record that expires while its lease is live is taken
// as absent by the next claim, and the key is run twice (dedup.Claim's
// ExpiresAt). The takeover check cannot see it: it trusts expires_at.
func (w *world) leaseWithinExpiry(p *proc, op, key string, luMs, expS int64) {
	if expS*1000 >= luMs {
		return
	}
	lid := -1
	if s := w.byKey[key]; s != nil {
		lid = s.lid
	}
	w.violate("expiry: a live lease outlives its record: %s's %s of %s (logical %d) left lease_until %d ms past expires_at %d s (TTL %s)",
		p.id, op, key, lid, luMs-expS*1000, expS, w.wide.ttl)
}
