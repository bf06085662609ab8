package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Invariants aimed at holes 4 and 6 of the exactly-once review.
//
// Hole 4 (the pool's visibility keeper): the pool starts a delivery only
// while the deadline it counts on, its last confirmed one, is ahead, and that
// deadline is a lower bound of SQS's. So when a pool worker claims a message,
// SQS's own deadline for the receipt it holds (what the fake granted at the
// receive and at each extension it applied) is still ahead. Excused: a
// receive answered late (a slow fault on it), which the pool cannot date.
//
// Hole 6 (a commit DynamoDB rejects as invalid is permanent): an "invalid"
// message is refused at its commit with a ValidationException; the worker
// must send it to the DLQ at once. So a commit rejected as invalid is never
// tried again within one delivery, and the SQS message is not received
// again unless the worker that had it tried to send its DLQ copy after the
// rejection (its delete may then be held up) or met a fault meanwhile (a
// crash, a pause, a lapsed extension, ...).

// rcpt is what SQS granted for one receipt handle.
type rcpt struct {
	proc  string
	lid   int
	msgID string
	until time.Duration // SQS's visibility deadline, since the start
	at    time.Duration // when SQS answered the receive, since the start
	slow  bool          // its receive answered late
}

// recvd is one receive of a source-queue message by a pool worker.
type recvd struct {
	proc string
	at   time.Duration
}

// observeGrant records the visibility SQS granted to receipts: at a receive
// (recv) or an applied extension. w.mu not held.
func (w *world) observeGrant(p *proc, q string, receipt, msgID string, vis time.Duration, recv, slow bool) {
	if p == nil || isDLQ(q) || !strings.HasPrefix(p.id, "w") {
		return
	}
	now := time.Since(w.start)
	w.mu.Lock()
	defer w.mu.Unlock()
	if recv {
		lid := w.msgLid[msgID]
		w.receipts[receipt] = &rcpt{proc: p.id, lid: lid, msgID: msgID, until: now + vis, at: now, slow: slow}
		if s := w.byLid[lid]; s != nil && s.failsAtCommit() {
			w.checkRedelivery(p, s, msgID, now)
		}
		return
	}
	if r := w.receipts[receipt]; r != nil {
		r.until = now + vis
	}
}

// checkStart: p claims key, as its pool starts a delivery. w.mu not held.
func (w *world) checkStart(p *proc, key string) {
	if p.dead.Load() || !strings.HasPrefix(p.id, "w") {
		return
	}
	now := time.Since(w.start)
	w.mu.Lock()
	defer w.mu.Unlock()
	var mine, held []*rcpt
	for _, r := range w.receipts {
		if r.proc == p.id {
			held = append(held, r)
		}
	}
	// In the order SQS granted them, not the map's: the statistics
	// below count the first receipt that explains the claim.
	sort.Slice(held, func(i, j int) bool {
		if held[i].at != held[j].at {
			return held[i].at < held[j].at
		}
		return held[i].msgID < held[j].msgID
	})
	for _, r := range held {
		if s := w.byLid[r.lid]; s != nil && s.key == key {
			if now < r.until || r.slow || w.frozeSince(p, r.lid, r.at) {
				w.stats["sim: claims inside SQS's visibility"]++
				return
			}
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return
	}
	var desc []string
	for _, r := range mine {
		desc = append(desc, fmt.Sprintf("message %s (logical %d) invisible until +%s", r.msgID, r.lid, r.until.Round(time.Millisecond)))
	}
	lid := mine[0].lid
	w.violations = append(w.violations, fmt.Sprintf("+%s pool started a delivery past its visibility: %s claimed %s, but SQS's deadline for its receipt had passed (%s): another consumer may hold it; faults of %s: %s; its story: %s",
		now.Round(time.Millisecond), p.id, key, strings.Join(desc, "; "), p.id, w.faultsBy(p.id, 0, now), strings.Join(w.trace[lid], " | ")))
}

// observeInvalid: DynamoDB rejected p's commit for key as invalid. w.mu not held.
func (w *world) observeInvalid(p *proc, key string) {
	s := w.byKey[key]
	if s == nil || (s.lim != nil && !s.invalid) {
		return // limits.go: a limit message of Q2, judged there
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats["dynamo: commit rejected as invalid"]++
	w.tr(s.lid, "%s's commit rejected as invalid", p.id)
	k := p.id + "|" + key
	w.rejected[k]++
	w.rejectedAt[k] = time.Since(w.start)
	if n, got := w.rejected[k], w.recvByProc[p.id+"|"+s.key]; n > got {
		w.violations = append(w.violations, fmt.Sprintf("+%s invalid message: commit retried: %s's commit of %s (logical %d) was rejected as invalid %d times in %d deliveries: a ValidationException must fail the message at once; its story: %s",
			time.Since(w.start).Round(time.Millisecond), p.id, key, s.lid, n, got, strings.Join(w.trace[s.lid], " | ")))
	}
}

// observeDLQTry: p is about to send a copy of lid to a DLQ. w.mu not held.
func (w *world) observeDLQTry(p *proc, lid int) {
	s := w.byLid[lid]
	if s == nil || !s.failsAtCommit() {
		return
	}
	w.mu.Lock()
	w.dlqTry[p.id+"|"+s.key] = time.Since(w.start)
	w.mu.Unlock()
}

// checkRedelivery: p received msgID (an invalid message) again. w.mu held.
func (w *world) checkRedelivery(p *proc, s *msgSpec, msgID string, now time.Duration) {
	w.recvByProc[p.id+"|"+s.key]++
	prev, ok := w.lastRecv[msgID]
	w.lastRecv[msgID] = recvd{proc: p.id, at: now}
	if !ok || w.rejectedAt[prev.proc+"|"+s.key] < prev.at {
		return // the previous holder did not reach the commit: nothing to say
	}
	if t, ok := w.dlqTry[prev.proc+"|"+s.key]; ok && t >= w.rejectedAt[prev.proc+"|"+s.key] {
		// It went for the DLQ at once; its delete may have been held up.
		w.stats["sim: invalid message redelivered after its DLQ copy was tried"]++
		return
	}
	if f := w.faultsBy(prev.proc, prev.at, now); f != "none" {
		w.stats["sim: invalid message redelivered after a fault"]++
		return
	}
	w.violations = append(w.violations, fmt.Sprintf("+%s invalid message: redelivered: message %s (logical %d, %s) received again by %s after %s's commit was rejected as invalid at +%s, with no fault of %s since its receive at +%s: a ValidationException must send it to the DLQ at once; its story: %s",
		now.Round(time.Millisecond), msgID, s.lid, s.key, p.id, prev.proc, w.rejectedAt[prev.proc+"|"+s.key].Round(time.Millisecond), prev.proc, prev.at.Round(time.Millisecond), strings.Join(w.trace[s.lid], " | ")))
}

// faultsBy lists the faults injected on proc's calls in [from, to].
func (w *world) faultsBy(proc string, from, to time.Duration) string {
	var out []string
	for _, f := range w.inj.Injected() {
		if f.Proc == proc && f.At >= from && f.At <= to {
			out = append(out, fmt.Sprintf("%s %s at +%s", f.Kind, f.ID, f.At.Round(time.Millisecond)))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
