package sim

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// DynamoDB's TTL sweeper. DynamoDB deletes an expired item at some time
// after its expires_at, at no time it promises; memdynamo deletes one only
// when told (memdynamo.DB.SweepExpired). Every world runs a sweeper over
// the dedup table: every 1 to 5 s (drawn from the seed) it deletes each
// record past its expires_at whose own delay has passed, a delay drawn
// from the seed and the record (0 to 10 s or 0 to 2 minutes). With the short TTLs of a
// quarter of the worlds (ttl.go) records then disappear under workers,
// conflict notes and operators, as they do in DynamoDB, where before they
// only stayed past their expiry.
//
// What the judge makes of it: a COMPLETED record swept lets its message
// apply once more (a duplicate after the TTL is a new message: DESIGN.md),
// as a claim that meets it expired does; and a conflict note takes effect
// only on a COMPLETED record (one that created the record it meant to
// change, after a sweep, or changed a record claimed again since, is a
// violation).

// sweepEvery is how often seed's sweeper runs.
func sweepEvery(seed uint64) time.Duration {
	return time.Second + time.Duration(hash64(seed, "sweep every")%4000)*time.Millisecond
}

// sweepDelay is how long after its expiry the record pk, expiring at exp,
// is swept.
// DynamoDB promises no time: half the records go within 10 s of their
// expiry (so that a race with the sweep is met often), the rest within 2
// minutes.
func sweepDelay(seed uint64, pk string, exp time.Time) time.Duration {
	x := hash64(seed, "sweep", pk, strconv.FormatInt(exp.Unix(), 10))
	if x%2 == 0 {
		return time.Duration((x>>1)%10_000) * time.Millisecond
	}
	return time.Duration((x>>1)%120_000) * time.Millisecond
}

// sweeper sweeps the dedup table until ctx ends.
func (w *world) sweeper(ctx context.Context) {
	every := sweepEvery(w.cfg.Seed)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Among the calls that reach the fakes at this instant, in the
		// sequencer's order (sequencer.go), so that a seed replays.
		w.seq.step("ttl-sweeper", "SweepExpired", table)
		now := time.Now()
		for _, s := range w.db.SweepExpired(now, func(_ string, key map[string]ddbtypes.AttributeValue, exp time.Time) bool {
			return !now.Before(exp.Add(sweepDelay(w.cfg.Seed, pkOf(key), exp)))
		}) {
			w.swept(pkOf(s.Item), s.Item)
		}
	}
}

// swept notes the sweep of key's record.
func (w *world) swept(key string, rec map[string]ddbtypes.AttributeValue) {
	st := dedup.GetS(rec, dedup.AttrStatus)
	w.stat("path: record swept by the TTL sweeper ("+st+")", 1)
	s := w.byKey[key]
	if s == nil || st != dedup.StatusCompleted {
		return
	}
	x := w.wide
	x.mu.Lock()
	x.grants[s.lid]++
	x.mu.Unlock()
	w.mu.Lock()
	w.tr(s.lid, "its COMPLETED record was swept by DynamoDB's TTL")
	w.mu.Unlock()
}

// judgeNote: a conflict note (dedup.Store.NoteConflict: an UpdateItem that
// sets conflict_first) takes effect only on a COMPLETED record: it notes
// what a claim met, and a record swept or claimed again since is left
// alone.
func (w *world) judgeNote(p *proc, in *dynamodb.UpdateItemInput, pre map[string]ddbtypes.AttributeValue, err error) {
	if err != nil || !slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), dedup.AttrConflictFirst) {
		return
	}
	w.stat("path: conflict noted", 1)
	if st := dedup.GetS(pre, dedup.AttrStatus); pre == nil || st != dedup.StatusCompleted {
		if pre == nil {
			st = "absent (swept, or never written)"
		}
		key := pkOf(in.Key)
		lid := -1
		if s := w.byKey[key]; s != nil {
			lid = s.lid
		}
		w.violate("ttl: a conflict note took effect on a record that was not COMPLETED: %s's note on %s (logical %d) found it %s",
			p.id, key, lid, st)
	}
}

// A conflict note across a sweep. The note (dedup.Store.NoteConflict) is
// the call after the claim that met a COMPLETED record of another payload,
// so a record swept or claimed again between the two is a race a few
// milliseconds wide: no world met it by chance. In the short-TTL worlds
// half the conflict messages are sent near the expiry of the record they
// conflict with (workload), and when such a claim meets the record within
// noteFreezeMax of its sweep, the process freezes whole as the claim's
// answer comes back, until the sweeper has deleted it (a GC pause, a
// stopped VM): the note then goes out after the sweep, and must leave the
// absent record absent (judgeNote).

// noteFreezeMax bounds such a freeze: well inside the delivery's
// visibility, so that the note still has a live context when it thaws.
const noteFreezeMax = 20 * time.Second

// nearExpiry reports whether seed's world sends the conflict message lid
// near the expiry of the record it conflicts with, and how long before the
// TTL ends (counted from its predecessor's send).
func (w *world) nearExpiry(lid int) (bool, time.Duration) {
	if !ttlWorld(w.cfg.Seed) || hash64(w.cfg.Seed, "near expiry", strconv.Itoa(lid))%2 != 0 {
		return false, 0
	}
	return true, time.Duration(hash64(w.cfg.Seed, "near expiry by", strconv.Itoa(lid))%12_000) * time.Millisecond
}

// freezeAcrossSweep is called when p's claim put on key was refused by the
// record pre: a conflict (item's payload another) on a record that the
// sweeper deletes within noteFreezeMax freezes p until just after that
// sweep.
func (w *world) freezeAcrossSweep(p *proc, key string, item, pre map[string]ddbtypes.AttributeValue) {
	if !ttlWorld(w.cfg.Seed) || pre == nil || dedup.GetS(pre, dedup.AttrStatus) != dedup.StatusCompleted {
		return
	}
	if was, is := dedup.GetS(pre, dedup.AttrPayloadSHA256), dedup.GetS(item, dedup.AttrPayloadSHA256); was == is || !dedup.Comparable(was, is) {
		return
	}
	exp := time.Unix(num(pre[dedup.AttrExpiresAt]), 0)
	// The first tick of the sweeper at or after the record's own sweep
	// time comes within one period of it.
	d := time.Until(exp.Add(sweepDelay(w.cfg.Seed, key, exp))) + sweepEvery(w.cfg.Seed) + time.Millisecond
	if d <= 0 || d > noteFreezeMax {
		return
	}
	w.stat("world: processes frozen from a conflict's claim past its record's sweep", 1)
	w.mu.Lock()
	w.opFreezes = append(w.opFreezes, opFreeze{proc: p.id, end: time.Since(w.start) + d})
	w.mu.Unlock()
	p.freeze(d)
	waitThaw(p) // the claim's answer reaches the process when it thaws
}
