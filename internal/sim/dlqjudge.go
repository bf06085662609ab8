package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Dead-lettering (issue 19): a message moved to a DLQ wrongly early in a run
// is redriven at minute 12, found a duplicate and deleted, and the end check
// sees nothing. So each move is judged when it is made:
//
//   - a product's copy (pool or Lambda) is right only after a permanent
//     verdict on the message in the copying process (since its first receive
//     of it, or the invocation: a process may receive a message again while
//     its earlier delivery still sends the copy): its effect failed permanently
//     (poison, fixable before the fix, a conflict refused downstream), its
//     commit was rejected as invalid, its key was completed for another
//     payload, or an effect write's own condition failed;
//   - a move by SQS's redrive policy (the DLQ message keeps its source id) is
//     counted with the receive counts seen (a lower bound: a receive whose
//     caller gave up counts at SQS unseen), not judged.

// permanent records a permanent verdict on lid in p's delivery.
func (w *world) permanent(p *proc, lid int, why string) {
	x := w.wide
	x.mu.Lock()
	x.verdict[p.id+"|"+strconv.Itoa(lid)] = time.Since(w.start)
	x.mu.Unlock()
	w.stat("dlq: permanent verdict ("+why+")", 1)
}

// retryable records a retryable failure of lid's effect in p.
func (w *world) retryable(p *proc, lid int, why string) {
	x := w.wide
	x.mu.Lock()
	x.retryErr[p.id+"|"+strconv.Itoa(lid)] = fmt.Sprintf("%s at +%s", why, time.Since(w.start).Round(time.Millisecond))
	x.failedAt[procLid(p, lid)] = time.Since(w.start)
	x.mu.Unlock()
}

// delivered notes that p got lid (a pool receive, a Lambda invocation), and
// the receive count SQS gave it. w.mu held.
func (w *world) delivered(p *proc, lid int, m types.Message) {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	if k := procLid(p, lid); p != nil {
		if _, ok := x.recvAt[k]; !ok {
			x.recvAt[k] = time.Since(w.start)
		}
	}
	if n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); err == nil {
		id := aws.ToString(m.MessageId)
		x.maxRC[id] = max(x.maxRC[id], n)
	}
}

func procLid(p *proc, lid int) string {
	if p == nil {
		return ""
	}
	return p.id + "|" + strconv.Itoa(lid)
}

// judgeCopy judges p's copy of lid to a DLQ, as it is made. w.mu held.
func (w *world) judgeCopy(p *proc, q string, lid int) {
	s := w.byLid[lid]
	if s == nil {
		return
	}
	x := w.wide
	x.mu.Lock()
	k := p.id + "|" + strconv.Itoa(lid)
	v, judged := x.verdict[k]
	r, got := x.recvAt[k]
	last := x.retryErr[k]
	x.mu.Unlock()
	if judged && (!got || v >= r) {
		w.stats["dlq: product move after a permanent verdict"]++
		return
	}
	if last == "" {
		last = "none seen by the simulation"
	}
	kind := "poison"
	switch {
	case s.conflict:
		kind = "conflict"
	case s.lim != nil:
		kind = "limit: " + s.lim.kind.String()
	case s.invalid:
		kind = "invalid"
	case s.fixable:
		kind = "fixable"
	}
	now := time.Since(w.start).Round(time.Millisecond)
	if !s.deadEnd() && (!s.fixable || time.Since(w.start) >= fixedAt) {
		w.violations = append(w.violations, fmt.Sprintf("+%s DLQ: %s moved message %d (%s, group %s), which never fails permanently now, to %s; its last retryable failure: %s; its story: %s",
			now, p.id, lid, s.queue, s.group, q, last, strings.Join(w.trace[lid], " | ")))
		return
	}
	w.violations = append(w.violations, fmt.Sprintf("+%s DLQ: %s moved message %d (%s, %s) to %s without a permanent verdict in its delivery (first received +%s, last verdict %s); its last retryable failure: %s; its story: %s",
		now, p.id, lid, s.queue, kind, q, r.Round(time.Millisecond), verdictAt(judged, v), last, strings.Join(w.trace[lid], " | ")))
}

func verdictAt(ok bool, at time.Duration) string {
	if !ok {
		return "none"
	}
	return "+" + at.Round(time.Millisecond).String()
}

// judgeSQSMove judges a move by the queue's redrive policy, seen the first
// time the DLQ message (with its source id) is met. w.mu held.
func (w *world) judgeSQSMove(id string, lid int) {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.judged[id] {
		return
	}
	x.judged[id] = true
	n, ok := x.maxRC[id]
	if !ok {
		w.stats["dlq: moves by the redrive policy (receive count unknown)"]++
		return
	}
	if n < w.maxReceive() {
		// The receive counts seen are a lower bound: a receive whose
		// caller gave up (its long poll cancelled, its answer lost before
		// the observer) counts at SQS unseen. Counted, not judged.
		w.stats["dlq: moves by the redrive policy after fewer receives seen than maxReceiveCount"]++
		return
	}
	w.stats["dlq: moves by the redrive policy after maxReceiveCount"]++
}
