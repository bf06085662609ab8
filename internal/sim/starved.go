package sim

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Starved messages (seed 2581@f44fef1). A message SQS's redrive policy
// moves after maxReceiveCount receives, never applied, is lost: unless the
// faults left it no chance, which the end check decides from what each of
// its receives met, and excuses then only that message.
//
// In the seed's world (freeze on, Q1's visibility 60 s) message 12's effect
// takes 49.3 s, and each worker that claimed it crashed or froze 0.2 to 47 s
// short of its commit; the receives in between met a frozen holder's live
// lease (busy), or were taken by the long poll of a process that had died
// (SQS serves a poll its caller gave up on: memsqs.Server.poll). Ten such
// receives and SQS moves it. No product could have applied it; a product
// that wastes a receive on its own (a lease left behind by a live worker, a
// retry in place past the visibility, a stop that hands back what it should
// not) leaves a receive unspoiled, and the loss is reported.

// starved is what the judge needs, recorded as it happens.
type starved struct {
	polls  sync.WaitGroup // long polls given up by their callers, until their wait ends
	mu     sync.Mutex
	recvs  map[string][]srcRecv        // SQS message id -> its receives from its source queue
	claims map[string][]claimAt        // dedup key -> claims written
	ids    map[int]map[string]struct{} // logical id -> its SQS message ids in a source queue
	copies map[int][]string            // logical id -> the SQS ids of its redrive copies
	stops  map[string]time.Duration    // process -> when its graceful stop began
	dels   map[int][]claimAt           // logical id -> deletes of its SQS messages (proc, time, message id)
	done   map[string]time.Duration    // dedup key -> its first commit
	// startDeaths: process -> when a fault on a start-up call of one of
	// its pools ended it (poolworker.go), after its other pool had
	// started receiving: it dies holding what that pool received.
	startDeaths map[string]time.Duration
}

type srcRecv struct {
	at     time.Duration
	proc   string
	count  int  // ApproximateReceiveCount
	orphan bool // taken by a long poll whose caller had given up
	dead   bool // orphan: its caller's process was dead by then
	// receipt: its receipt handle, whose visibility the holder's
	// heartbeat may have extended (w.receipts: holes.go).
	receipt string
	// sentLate: the poll's request was held by a stall of its own process
	// (freeze, pause) after the worker took its start time, and it came
	// back past the wait: the worker dates what it brings by the poll's
	// start, as a slow answer, so it may find it expired on arrival.
	sentLate bool
	// failed: an event source mapping's receive whose invocation failed
	// (its container died, its function timed out or its init failed)
	// after faults on that container's calls: the whole batch comes back
	// after the visibility timeout.
	failed bool
}

// maxWait is the longest long poll (SQS's WaitTimeSeconds limit).
const maxWait = 20 * time.Second

type claimAt struct {
	at   time.Duration
	proc string
	id   string // a delete's SQS message id
}

func newStarved() *starved {
	return &starved{recvs: map[string][]srcRecv{}, claims: map[string][]claimAt{}, ids: map[int]map[string]struct{}{}, copies: map[int][]string{}, stops: map[string]time.Duration{}, dels: map[int][]claimAt{}, done: map[string]time.Duration{}, startDeaths: map[string]time.Duration{}}
}

// noteRecv records a receive of a source queue's message by p (nil: the
// event source mapping's, which esmReceived records once it knows the
// container). orphan: p's long poll, given up, took it.
func (w *world) noteRecv(p *proc, lid int, m types.Message, orphan, sentLate bool) {
	if p == nil {
		return
	}
	w.starve.note(lid, m, srcRecv{at: time.Since(w.start), proc: p.id, orphan: orphan, dead: orphan && p.dead.Load(), sentLate: sentLate})
}

// esmReceived notes the receives of an event source mapping's poll, made
// at +at, whose batch went to p's container (or p's cold start, which
// failed). failed: the invocation failed (its container died or its init
// failed): the whole batch comes back after the visibility timeout. The
// judge counts that as spoiled when the container met a fault.
func (w *world) esmReceived(p *proc, at time.Duration, ms []types.Message, failed bool) {
	for _, m := range ms {
		w.starve.note(lidNum(aws.ToString(m.Body)), m, srcRecv{at: at, proc: p.id, failed: failed && p.faults.Load() > 0})
	}
}

// breaksRedriveRule: the world's maxReceiveCount is not above the event
// source mapping's batch size, which the worker-lambda Terraform module
// refuses for a FIFO queue (docs/DEPLOY.md): a batch's last message may
// spend all its receives waiting behind the others, returned unstarted by
// invocations that run out of time, without a fault. Only in such a world
// does the judge excuse returns for time (esmReturned); where the rule
// holds, each message keeps receives of its own.
func (w *world) breaksRedriveRule() bool { return w.maxReceive() <= w.shape.LambdaBatch }

// esmReturned notes, of an event source mapping's batch whose invocation
// answered after faults on its container's calls or, in a world that breaks
// the redrive rule, late in its timeout (the handler starts no message it
// has too little time left for: a batch of one hot group's messages may not
// all fit), the messages it reported
// as batch item failures (back): failed themselves, or not started behind
// an earlier failed message of their FIFO group (the partial-batch rule).
// Those receives are spoiled: the messages come back after the visibility
// timeout, and a message behind a head that keeps meeting faults spends
// its receives without a fault of its own.
func (w *world) esmReturned(p *proc, at time.Duration, ms []types.Message, back map[string]bool) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, m := range ms {
		id := aws.ToString(m.MessageId)
		if !back[id] {
			continue
		}
		rs := x.recvs[id]
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].at == at && rs[i].proc == p.id && rs[i].receipt == aws.ToString(m.ReceiptHandle) {
				rs[i].failed = true
				break
			}
		}
	}
}

// note records r, a receive of m (lid's), with m's receive count and
// receipt.
func (x *starved) note(lid int, m types.Message, r srcRecv) {
	r.count, _ = strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	r.receipt = aws.ToString(m.ReceiptHandle)
	id := aws.ToString(m.MessageId)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.recvs[id] = append(x.recvs[id], r)
	if x.ids[lid] == nil {
		x.ids[lid] = map[string]struct{}{}
	}
	x.ids[lid][id] = struct{}{}
}

// noteClaim records that p wrote a claim of key.
func (w *world) noteClaim(p *proc, key string) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	x.claims[key] = append(x.claims[key], claimAt{at: time.Since(w.start), proc: p.id})
}

// noteCommit records key's first commit. w.mu held.
func (w *world) noteCommit(key string) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.done[key]; !ok {
		x.done[key] = time.Since(w.start)
	}
}

// noteDelete records p's delete of lid's SQS message id. w.mu held.
func (w *world) noteDelete(p *proc, lid int, id string) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dels[lid] = append(x.dels[lid], claimAt{at: time.Since(w.start), proc: p.id, id: id})
}

// noteStop records that p's graceful stop begins: what it holds and has
// not started, or waits to retry in place, goes back to SQS (pool.Run).
func (w *world) noteStop(p *proc) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stops[p.id] = time.Since(w.start)
}

// noteStartDeath records that p dies now because a start-up call of one
// of its pools met a fault (exactly.New failed).
func (w *world) noteStartDeath(p *proc) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	x.startDeaths[p.id] = time.Since(w.start)
}

// stall is a fault injected into a process's call: one that stops all of
// it (crash, crash-after, freeze) or any other, on a call about subject
// (a dedup key, a balance item, or for an SQS batch the queue and the
// logical id of its first entry).
type stall struct {
	at, end time.Duration
	whole   bool // the process
	op      string
	subject string
	lid     string // an SQS batch's first entry
	kind    Kind
}

func (w *world) stalls() map[string][]stall {
	out := map[string][]stall{}
	for _, f := range w.inj.Injected() {
		parts := strings.Split(f.ID, "|")
		st := stall{at: f.At, end: f.At, op: parts[0], kind: f.Kind}
		if len(parts) > 1 {
			st.subject = parts[1]
		}
		if len(parts) > 3 && strings.HasSuffix(st.op, "Batch") {
			st.lid = parts[2]
		}
		switch f.Kind {
		case Crash, CrashAfter:
			st.whole, st.end = true, 1<<62
		case Freeze:
			st.whole, st.end = true, f.At+w.inj.delay(f.ID)
		case Slow, Pause:
			st.end = f.At + w.inj.delay(f.ID) // the call's answer, or the caller, held that long
		}
		out[f.Proc] = append(out[f.Proc], st)
	}
	return out
}

// starvedOut reports whether the faults left lid no chance before SQS's
// redrive policy moved it: each of the maxReceiveCount receives of each of
// its source messages was spoiled. why tells how, receive by receive.
// w.mu held.
func (w *world) starvedOut(s *msgSpec) (ok bool, why string) {
	moved := w.policyMoved()
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := x.ids[s.lid]
	if len(ids) == 0 {
		return false, "no receive by a worker seen"
	}
	// Only the SQS messages the policy moved are judged: a poison
	// message's first delivery, moved by the product and deleted, whose
	// redrive copy the policy later moved, had no maxReceiveCount receives
	// to spoil (seed 138@59ba4b0).
	var byPolicy map[string]struct{}
	for id := range ids {
		if moved[id] {
			if byPolicy == nil {
				byPolicy = map[string]struct{}{}
			}
			byPolicy[id] = struct{}{}
		}
	}
	if byPolicy != nil {
		ids = byPolicy
	}
	st := w.stalls()
	// A death that a start-up call's fault caused stops all of the
	// process from then on, as a crash does (seeds 5318 and 7972@df5a66b:
	// the second pool's queue attributes or table description lost, the
	// first pool's messages, received a moment before, held by the dead
	// process for a visibility).
	for proc, at := range x.startDeaths {
		st[proc] = append(st[proc], stall{at: at, end: 1 << 62, whole: true, op: "exactly.New", kind: Crash})
	}
	vis := w.shape.Vis1
	if s.queue != q1Name {
		vis = visibility
	}
	// The group's calls: a fault on any of them holds up the group's lane
	// (its messages run in order: one that goes back to SQS takes the
	// rest of the group with it).
	keys, lids := map[string]bool{rmwKey(s.queue[:2] + "-" + s.group): true}, map[string]bool{}
	for _, m := range w.msgs {
		if m.queue == s.queue && m.group == s.group {
			keys[m.key] = true
			lids[strconv.Itoa(m.lid)] = true
		}
	}
	mine := func(f stall) bool {
		return keys[f.subject] || (f.lid != "" && f.subject == s.queue && lids[f.lid])
	}
	// stalled: a stall of proc that matters to this message overlaps
	// [from, to): it starts in it, or it started before and lasts into it
	// (a slow claim whose late answer then fails the lane's head, seed
	// 138@59ba4b0).
	stalled := func(proc string, from, to time.Duration) (stall, bool) {
		for _, f := range st[proc] {
			if (f.whole || mine(f)) && f.at < to && f.end >= from {
				return f, true
			}
		}
		return stall{}, false
	}
	// lateAnswer: the receive's own answer was lost or delayed past the
	// visibility (the fault is drawn when the long poll starts).
	lateAnswer := func(proc string, t time.Duration) bool {
		for _, f := range st[proc] {
			if f.op == "ReceiveMessage" && (f.kind == Lost || f.kind == Slow) && f.subject == s.queue && f.at <= t && f.at >= t-maxWait {
				return true
			}
		}
		return false
	}
	// lateHead: an earlier message of the group came to proc in a late
	// answer shortly before t. Its delivery was stale on arrival, so it
	// heads proc's lane for the group until the worker finds it no longer
	// holds it, and what waits behind it goes back to SQS with it (seed
	// 138@59ba4b0: a slow receive, message 31 run on a stale receipt for
	// 46 s, then left to SQS with 32's fresh delivery).
	lateHead := func(proc string, t time.Duration) (int, bool) {
		for _, m := range w.msgs {
			if m.queue != s.queue || m.group != s.group || m.gseq >= s.gseq {
				continue
			}
			for id := range x.ids[m.lid] {
				for _, r := range x.recvs[id] {
					if r.proc == proc && r.at < t && r.at >= t-3*vis-maxWait && lateAnswer(proc, r.at) {
						return m.lid, true
					}
				}
			}
		}
		return 0, false
	}
	// stoppedAt: proc was frozen or dead at t. A receive can be answered
	// to one: the long poll met freeze or crash-after when it began, and
	// its answer came back while the process was stopped (seed 138@59ba4b0).
	stoppedAt := func(proc string, t time.Duration) bool {
		for _, f := range st[proc] {
			if f.whole && f.at <= t && t <= f.end {
				return true
			}
		}
		return false
	}
	// brokenHead: proc claimed a key of the group, then froze, and the
	// freeze ended within a visibility before t: the run that heads its
	// lane for the group was broken by it (its lease ran out unextended)
	// and fails soon after the thaw, handing back what waits behind it,
	// a newer receipt of the same message included (seed 138@59ba4b0).
	brokenHead := func(proc string, t time.Duration) bool {
		for _, f := range st[proc] {
			if f.kind != Freeze || f.end > t || f.end < t-vis {
				continue
			}
			for key := range keys {
				for _, c := range x.claims[key] {
					if c.proc == proc && c.at <= f.at && c.at >= f.at-2*vis {
						return true
					}
				}
			}
		}
		return false
	}
	// frozenHead: an earlier message of the group came to proc before a
	// freeze of proc that outlasted its visibility (no heartbeat runs in
	// a frozen process) and ended within a visibility before t. Its
	// receipt was stale at the thaw, so it headed proc's lane for the
	// group until the worker found it expired and left it to SQS, and
	// what waited behind it went back with it (seed 5063@df5a66b:
	// message 1's redrive copy received 5 s before a 41 s freeze, the
	// answer that brought message 3 at the thaw handed back 20 ms on). A
	// FIFO queue's: a standard queue's messages wait in no group's lane.
	frozenHead := func(proc string, t time.Duration) (int, bool) {
		if w.std(s.queue) {
			return 0, false
		}
		for _, f := range st[proc] {
			if f.kind != Freeze || f.end > t || f.end < t-vis {
				continue
			}
			for _, m := range w.msgs {
				if m.queue != s.queue || m.group != s.group || m.gseq >= s.gseq {
					continue
				}
				if d, ok := x.done[m.key]; ok && d <= f.at {
					continue
				}
				for id := range x.ids[m.lid] {
					for _, r := range x.recvs[id] {
						until := r.at + vis
						if g := w.receipts[r.receipt]; g != nil && g.proc == r.proc {
							until = max(until, g.until)
						}
						if r.proc == proc && r.at <= f.at && f.at < until && until < f.end {
							return m.lid, true
						}
					}
				}
			}
		}
		return 0, false
	}
	var whys []string
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		rs := x.recvs[id]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].count < rs[j].count })
		seen := map[int]bool{}
		for i, r := range rs {
			seen[r.count] = true
			// Until the message was receivable again: the next receive
			// (a holder's heartbeat may have kept it past one visibility,
			// and a stall after that is what let it go: seed 138@187ede5),
			// or after the last, its visibility as the holder last set it
			// (seed 138@59ba4b0: a crash 47 s into a commit that the
			// heartbeat had kept visible).
			end := r.at + vis
			if g := w.receipts[r.receipt]; g != nil && g.proc == r.proc {
				end = max(end, g.until)
			}
			// The next receive later than this one: a standard queue may
			// hand the same message twice in one answer (two receive
			// counts at one instant), and both stay held until then
			// (seed 3982@965977c). Of the same copy: a standard queue's
			// duplicate copy is held apart from the message, until its
			// own next receive (seed 12660@722ad8d: a copy received 2 s
			// before the message, whose holder crashed 10 s later).
			for _, next := range rs[i+1:] {
				if next.at > r.at && receiptCopy(next.receipt) == receiptCopy(r.receipt) {
					end = next.at
					break
				}
			}
			headLid, lateHd := lateHead(r.proc, r.at)
			frozenLid, frozenHd := frozenHead(r.proc, r.at)
			switch f, stalledIn := stalled(r.proc, r.at, end); {
			case r.orphan && r.dead:
				whys = append(whys, fmt.Sprintf("#%d taken by the orphaned long poll of dead %s", r.count, r.proc))
			case r.orphan:
				return false, fmt.Sprintf("#%d taken by the given-up long poll of live %s", r.count, r.proc)
			case lateAnswer(r.proc, r.at):
				whys = append(whys, fmt.Sprintf("#%d: its answer to %s was lost or late", r.count, r.proc))
			case r.sentLate:
				whys = append(whys, fmt.Sprintf("#%d: %s's poll went out late, held by a stall of its process", r.count, r.proc))
			case lateHd:
				whys = append(whys, fmt.Sprintf("#%d: %s's lane was headed by message %d, answered to it late", r.count, r.proc, headLid))
			case stoppedAt(r.proc, r.at):
				whys = append(whys, fmt.Sprintf("#%d answered to %s, frozen or dead", r.count, r.proc))
			case brokenHead(r.proc, r.at):
				whys = append(whys, fmt.Sprintf("#%d: %s had just thawed from a freeze that broke its run of the group", r.count, r.proc))
			case frozenHd:
				whys = append(whys, fmt.Sprintf("#%d: %s's lane was headed by message %d, gone stale in a freeze it had just thawed from", r.count, r.proc, frozenLid))
			case stalledIn:
				if f.at >= r.at {
					whys = append(whys, fmt.Sprintf("#%d: %s met %s on %s %s later", r.count, r.proc, f.kind, f.op, (f.at-r.at).Round(time.Millisecond)))
				} else {
					whys = append(whys, fmt.Sprintf("#%d: %s's %s on %s began %s before and lasted into it", r.count, r.proc, f.kind, f.op, (r.at-f.at).Round(time.Millisecond)))
				}
			case r.failed:
				whys = append(whys, fmt.Sprintf("#%d: the invocation of %s failed after faults on its container", r.count, r.proc))
			case x.stopping(r.proc, end):
				whys = append(whys, fmt.Sprintf("#%d: %s began a graceful stop %s later", r.count, r.proc, (x.stops[r.proc]-r.at).Round(time.Millisecond)))
			default:
				// Busy: a key of its group (its own, or one ahead of it
				// in its lane) is held, uncommitted, by another process
				// that has stopped, or met a fault on the group's calls,
				// since its claim, recently enough for its lease to live
				// on.
				holder := ""
				for key := range keys {
					var last claimAt
					for _, c := range x.claims[key] {
						if c.at <= r.at {
							last = c
						}
					}
					if d, ok := x.done[key]; last.proc == "" || last.proc == r.proc || (ok && d <= r.at) {
						continue
					}
					// Its lease, extended at most until it stopped, can be
					// live only if it stopped within a lease (< vis) of now;
					// or the holder was running it, live, and stopped or
					// failed within a lease after: a duplicate copy of a
					// standard queue, received while the other is run,
					// spends a receive on the holder's claim, which that
					// stall then left unused (seed 3723@965977c, a world
					// whose 1 s long polls receive such copies often).
					if _, ok := stalled(last.proc, max(last.at, r.at-vis), r.at+vis); ok {
						holder = last.proc
						break
					}
				}
				if holder == "" {
					return false, fmt.Sprintf("#%d (+%s, %s) met no fault", r.count, r.at.Round(time.Millisecond), r.proc)
				}
				whys = append(whys, fmt.Sprintf("#%d met the lease of %s, stopped or failing since its claim", r.count, holder))
			}
		}
		for n := 1; n <= w.maxReceive(); n++ {
			if !seen[n] {
				return false, fmt.Sprintf("receive #%d of %s not seen", n, id)
			}
		}
	}
	return true, strings.Join(whys, "; ")
}

// receiptCopy returns, of a memsqs receipt handle, the number of the
// standard queue's duplicate copy it belongs to ("" for the message
// itself: memsqs.WithDuplicates).
func receiptCopy(h string) string {
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return ""
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) < 4 {
		return ""
	}
	_, c, _ := strings.Cut(parts[3], "/")
	return c
}

// policyMoved is the set of SQS message ids moved by a redrive policy
// (judgeSQSMove), as far as seen.
func (w *world) policyMoved() map[string]bool {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.judged)
}

// receive is the fake's ReceiveMessage with a context the caller's end does
// not cancel: SQS (and memsqs) serve a long poll its caller gave up on, and
// what that poll takes is in flight for nobody until its visibility timeout.
// The sim sees what it takes (noteRecv, orphan) instead of losing sight of
// it; the poll ends within its wait time (run waits for it).
func (c *faultySQS) receive(ctx context.Context, q string, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	type answer struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	w := c.p.w
	var mu sync.Mutex
	gaveUp := false
	done := make(chan answer, 1)
	w.starve.polls.Go(func() {
		out, err := c.inner.ReceiveMessage(context.WithoutCancel(ctx), in, opt...)
		mu.Lock()
		defer mu.Unlock()
		if !gaveUp {
			done <- answer{out, err}
			return
		}
		if err == nil && !isDLQ(q) {
			w.orphaned(c.p, q, out.Messages)
		}
	})
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case a := <-done:
		return a.out, a.err
	default:
		gaveUp = true
		return nil, ctx.Err()
	}
}

// orphaned notes what p's given-up long poll took.
func (w *world) orphaned(p *proc, q string, ms []types.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range ms {
		lid := lidNum(aws.ToString(m.Body))
		w.tr(lid, "the given-up long poll of %s (dead: %v) took %s from %s (receive count %s)", p.id, p.dead.Load(), aws.ToString(m.MessageId), q, m.Attributes["ApproximateReceiveCount"])
		w.noteRecv(p, lid, m, true, false)
	}
}

// noteCopy records a redrive copy of lid sent back to its queue. w.mu held.
func (w *world) noteCopy(lid int, id string) {
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	x.copies[lid] = append(x.copies[lid], id)
}

// appliedFromCopy reports whether lid's first application was made by a
// process that had received one of its redrive copies by then (and not by
// a zombie still holding its first delivery, seed 2581: a frozen worker
// that commits after SQS's redrive policy moved the message and the
// operator's redrive sent it back). w.mu held.
func (w *world) appliedFromCopy(lid int) bool {
	if len(w.callers[lid]) == 0 {
		return false
	}
	who, at := w.callers[lid][0], w.appliedAt[lid]
	x := w.starve
	x.mu.Lock()
	defer x.mu.Unlock()
	// The delivery the applying effect ran for, as the effect saw it: a
	// process may hold a resent duplicate (a new message to SQS) and a
	// redrive copy of the same message in one lane, and apply the first
	// with no delete seen after (seed 14206@9c8d413).
	if via := w.appliedVia[lid]; via != "" {
		return slices.Contains(x.copies[lid], via)
	}
	// The delete that follows the commit names the delivery it came from
	// (a process may hold the first delivery and a redrive copy at once,
	// the copy waiting behind it in the group's lane).
	for _, d := range x.dels[lid] {
		if d.proc == who && d.at >= at {
			return slices.Contains(x.copies[lid], d.id)
		}
	}
	for _, id := range x.copies[lid] {
		for _, r := range x.recvs[id] {
			if r.proc == who && r.at <= at {
				return true
			}
		}
	}
	return false
}

// stopping: proc's graceful stop began before to: in [from, to), or
// before the receive, whose long poll was under way then (what a stopping
// pool's polls bring is handed back: seed 138@59ba4b0). x.mu held.
func (x *starved) stopping(proc string, to time.Duration) bool {
	at, ok := x.stops[proc]
	return ok && at < to
}
