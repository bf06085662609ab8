package sim

import (
	"fmt"
	"strings"
	"time"
)

// A commit that applies only the effect's writes (Q1's modes:
// transactional, optimistic, carried, group commit) is sent only while the
// worker holds the message (DESIGN.md, Group order): one
// sent after SQS's visibility of every receipt the worker had of it ended
// may apply the message after its successors. Judged against SQS's own
// grants (holes.go's receipts), when the request reaches the table. The
// window DESIGN.md leaves, a stop between the worker's check and its
// request, is excused: the request itself, or a call on its way (the
// outbox's reads), froze, paused or answered slowly just before.

// heldSlack: how recently a stall must have ended to be on the request's
// way, and how long the request may take to reach the table after the
// worker's check (the sequencer's steps are microseconds; every other call
// is instantaneous in virtual time).
const heldSlack = 5 * time.Millisecond

// checkHeldAtCommit judges p's transaction committing the records of keys;
// k is the fault the request itself met. A group-commit worker's commits
// were checked when they joined, up to the group window before. w.mu not
// held.
func (w *world) checkHeldAtCommit(p *proc, keys []string, k Kind) {
	if !strings.HasPrefix(p.id, "w") || k == Freeze || k == Pause {
		return
	}
	now := time.Since(w.start)
	slack := heldSlack // the sequencer's steps between the worker's check and the table
	if w.groupCommits(p.id) {
		// A group's first attempt is checked when it joins, up to the
		// window before the group's request, whether it is alone or not.
		slack += w.shape.GroupWindow
	}
	if w.stalledJustBefore(p, now) {
		w.stat("window: a writes-only commit sent after a stall on its way (DESIGN.md, Group order: what remains)", 1)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, key := range keys {
		s := w.byKey[key]
		if s == nil || s.queue != q1Name {
			continue // Q2 is claim mode: its commit records an outside effect that ran
		}
		held := false
		for _, r := range w.receipts {
			if r.proc == p.id && r.lid == s.lid && now < r.until+slack {
				held = true
				break
			}
		}
		if held {
			w.stats["sim: writes-only commits sent while held"]++
			continue
		}
		w.violations = append(w.violations, fmt.Sprintf("+%s commit not held: %s sent the commit of message %d (%s) after SQS's visibility of every receipt it had of it ended; its story: %s",
			now.Round(time.Millisecond), p.id, s.lid, s.key, strings.Join(w.trace[s.lid], " | ")))
	}
}

// stalledJustBefore: a freeze, pause or slow answer of p ended within
// heldSlack before now.
func (w *world) stalledJustBefore(p *proc, now time.Duration) bool {
	w.mu.Lock()
	for _, f := range w.opFreezes { // an operator's moment (freezeAtCommit)
		if f.proc == p.id && f.end <= now && f.end >= now-heldSlack {
			w.mu.Unlock()
			return true
		}
	}
	w.mu.Unlock()
	for _, f := range w.inj.Injected() {
		if f.Proc != p.id || (f.Kind != Freeze && f.Kind != Pause && f.Kind != Slow) {
			continue
		}
		if end := f.At + w.inj.delay(f.ID); end <= now && end >= now-heldSlack {
			return true
		}
	}
	return false
}
