package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/redrive"
)

// Settings of the simulated deployment.
const (
	table        = "sim-dedup"
	namespace    = "sim"
	visibility   = 30 * time.Second
	lease        = 27 * time.Second // pool.DefaultLease(30 s)
	ttl          = 24 * time.Hour
	lambdaTO     = 5 * time.Second  // function timeout; the queue's visibility is 6× it
	lambdaInit   = 10 * time.Second // Lambda's limit on a cold start's init phase (NewLambdaHandler)
	maxReceive   = 10               // the queues' redrive policy (the world's DLQ moves); 30 with bursts: maxReceive()
	maxSkew      = 500 * time.Millisecond
	redriveAt    = 12 * time.Minute // the operator redrives DLQ1 into Q1
	fixedAt      = 9 * time.Minute  // from then on, "fixable" messages succeed
	settleCap    = 4 * time.Hour    // virtual time after which an unsettled run fails
	q1Name       = "q1-orders.fifo" // messageGroup-scoped, transactional ledger, pool only
	q2Name       = "q2-mail.fifo"   // messageGroup-scoped, claim mode, pool and Lambda side by side
	dlq1Name     = "q1-dlq.fifo"    // queue-scoped: a wider dedup scope than Q1's
	dlq2Name     = "q2-dlq.fifo"
	groupsPerQ   = 6
	msgsPerGroup = 6
)

// Config of one run.
type Config struct {
	Seed    uint64
	Rate    float64
	Kinds   map[Kind]bool
	Ops     map[string]bool
	Only    map[string]bool // when set, only these fault IDs may fire (shrinking)
	Workers int             // pool workers
	Lambdas int             // concurrent Lambda pollers of the event source mapping
	// Swarm draws the world's shape from the seed (swarm.go); the Fixed*
	// settings keep the command line's rate, kinds and operations.
	Swarm                           bool
	FixedRate, FixedKinds, FixedOps bool
	// Logs keeps every process's log lines (Debug and up, with their
	// attributes) in Result.Logs: what each worker made of each message,
	// for reading a red seed (-sim.logs). Off: only counted, as ever.
	Logs bool
	// Unsequenced turns the sequencer off (sequencer.go): calls that wake
	// together reach the fakes in the Go runtime's order.
	Unsequenced bool
	LogSteps    bool // keep every step of the sequencer in Result.Steps (debugging a replay)
	// Want replays a recording (record.go): the run compares each step
	// it takes with the recorded one and reports the first that differs
	// in Result.Diverged.
	Want []Step
}

// msgSpec is one logical message of the workload.
type msgSpec struct {
	lid     int
	queue   string // queue name
	group   string
	gseq    int
	keyAttr string // idempotency-key attribute, "" for none
	dedupID string
	poison  bool // fails permanently, always
	// conflict: the previous message's idempotency-key with another body:
	// the ledger must refuse it (conflict → DLQ), never run its effect.
	conflict bool
	fixable  bool // fails permanently until fixedAt (then redriven)
	// invalid: its ledger effect writes one item twice, a transaction
	// DynamoDB rejects (ValidationException): a permanent failure (Q1 only).
	invalid bool
	key     string
	body    string
	sends   []send
	lim     *limSpec // limits.go: its commit sits at, under or over a DynamoDB limit
	refused bool     // carriedwrites.go: an effect write after the carrier fails its condition
}

type send struct {
	at      time.Duration
	dedupID string
	kind    string // original, dup-in-window, dup-after-window, dup-new-dedup-id
}

// world is one run: the fakes, the processes, what the sim saw.
type world struct {
	logMu sync.Mutex
	logs  []string // every process's log lines, with Config.Logs
	cfg   Config
	shape shape
	inj   *Injector
	sqs   *memsqs.Server
	db    *memdynamo.DB
	urls  map[string]string // name -> URL
	arns  map[string]string
	start time.Time
	ctx   context.Context

	msgs  []*msgSpec
	byLid map[int]*msgSpec
	byKey map[string]*msgSpec

	txMu sync.Mutex
	wg   sync.WaitGroup

	mu           sync.Mutex
	violations   []string
	msgLid       map[string]int // SQS message id -> logical id
	committed    map[int]bool
	applied      map[int]int // transactional commits / downstream calls
	callers      map[int][]string
	order        map[string][]int // queue|group -> logical ids in order of first application
	excused      map[int]bool     // claim mode: the window opened for it
	effectBy     map[string]*proc // claim mode: the process that called a key's effect last (operators.go)
	q2Commits    int              // Q2's claim-mode commits by pool workers so far (forcedstop.go)
	commitFreeze *commitFreeze    // an operator waiting for a claim-mode commit to freeze (operators.go)
	opFreezes    []opFreeze       // the freezes the world made (freezeAtCommit, freezeAcrossSweep), as the injector lists its own
	deadLettered map[int]bool
	// what the product sent to the DLQs and the operator's redrives back
	dlqSent     map[int]bool
	dlqSentLast map[int]time.Duration // the product's last DLQ copy of lid, since the start
	redriven    map[int]bool
	stats       map[string]int
	trace       map[int][]string         // per logical message: its SQS story, for the report of a violation
	appliedAt   map[int]time.Duration    // first application
	appliedVia  map[int]string           // the SQS message id of the delivery the first application ran for
	dlqAt       map[int]time.Duration    // first time it went (or was about to go) to a DLQ
	lastSrcRecv map[string]time.Duration // SQS message id -> last receive from a source queue
	redrivenAt  map[int]time.Duration    // first redrive copy back into its queue
	// moves and redrives: every time lid went to a DLQ (as worldMoved and
	// markDLQ date it) and every redrive copy sent back: inDLQAt.
	moves, redrives map[int][]time.Duration
	// The same in the order they happened (several may share an instant of
	// virtual time), with when each redrive copy was sent: failedAgainBefore.
	evt        int
	moveEvt    map[int][]int
	redriveEvt map[int][]evtBy
	copyEvt    map[string]evtBy // redrive copy's SQS message id -> its send
	dlqSrc     map[int]string   // the source message id of lid's last product DLQ copy (FIFO: its dedup id names it)

	flaked map[int]bool // swarm.go: messages whose downstream failed once

	// holes.go
	receipts   map[string]*rcpt         // receipt handle -> what SQS granted (pool workers)
	lastRecv   map[string]recvd         // SQS message id -> its last receive (invalid messages)
	recvByProc map[string]int           // proc|key -> receives (invalid messages)
	rejected   map[string]int           // proc|key -> commits rejected as invalid
	rejectedAt map[string]time.Duration // proc|key -> last rejection
	dlqTry     map[string]time.Duration // proc|key -> last DLQ copy tried (invalid messages)

	wide   *widened // fence.go, ttl.go, dlqjudge.go, rmw.go
	copies *copies  // copies.go
	ob     *obHalf  // outboxworld.go
	lims   *limits  // limits.go

	sqsDups atomic.Int64 // standard.go: SQS's duplicate deliveries left

	seq *sequencer // sequencer.go: nil when off

	// tail.go: when the faults stopped, and when the tail's redrives began
	// (0 before).
	healedAt, redriveFrom time.Duration
}

// worldMoved notes a DLQ message seen with the id it had in its source
// queue: the redrive policy moved it (a product copy has an id of its own).
// It left the source queue at the receive after the last one observed
// (receives whose caller gave up are not observed). w.mu held.
func (w *world) worldMoved(id string, lid int) {
	at, ok := w.lastSrcRecv[id]
	if !ok {
		return
	}
	w.judgeSQSMove(id, lid)
	w.judgeTailMove(lid, at)
	w.noteArrived(id, at)
	w.deadLettered[lid] = true
	at += time.Nanosecond // after that receive, whose delivery may have run
	if cur, has := w.dlqAt[lid]; !has || at < cur {
		w.dlqAt[lid] = at
	}
	w.moves[lid] = append(w.moves[lid], at)
	w.evt++
	w.moveEvt[lid] = append(w.moveEvt[lid], w.evt)
}

// evtBy is a redrive copy's send: its place among the world's events, and
// the redrive run (its process) that sent it.
type evtBy struct {
	e    int
	proc string
}

// failedAgainBefore reports whether lid was in a DLQ, having failed again
// after the very redrive run that sent the copy with SQS id copyID had sent
// lid back, when it sent that copy (as the events happened, not their
// instants): a redrive leaves a message that fails again meanwhile in the
// DLQ and moves the rest of its group on, as a worker does with a message
// it dead-letters. (A message that failed again after an earlier run is
// one the run found in the DLQ: its group waits for it.) w.mu held or the
// world stopped.
func (w *world) failedAgainBefore(lid int, copyID string) bool {
	c, ok := w.copyEvt[copyID]
	if !ok {
		return false
	}
	var rd evtBy
	for _, x := range w.redriveEvt[lid] {
		if x.e < c.e && x.e > rd.e {
			rd = x
		}
	}
	if rd.e == 0 || rd.proc != c.proc {
		return false
	}
	return slices.ContainsFunc(w.moveEvt[lid], func(m int) bool { return m > rd.e && m < c.e })
}

// inDLQAt reports whether lid was in a DLQ at t: its latest move by then
// came after its latest redrive by then (a message may be redriven, moved
// by the policy again, and its successor's redrive copy applied
// meanwhile). w.mu held.
func (w *world) inDLQAt(lid int, t time.Duration) bool {
	latest := func(ts []time.Duration) (time.Duration, bool) {
		var m time.Duration
		ok := false
		for _, x := range ts {
			if x <= t && (!ok || x > m) {
				m, ok = x, true
			}
		}
		return m, ok
	}
	mv, moved := latest(w.moves[lid])
	rd, redriven := latest(w.redrives[lid])
	return moved && (!redriven || mv > rd)
}

// productCopyInDLQ: the product's own DLQ move accounts for lid's copy in
// the DLQ, not SQS's redrive policy: it sent one after the operator's
// redrive (or there was no redrive). A poison message the product moved,
// redriven, and then moved by the policy after maxReceiveCount receives is
// the policy's. w.mu held or the world stopped.
func (w *world) productCopyInDLQ(lid int) bool {
	if !w.dlqSent[lid] {
		return false
	}
	r, redriven := w.redrivenAt[lid]
	return !redriven || w.dlqSentLast[lid] > r
}

// markDLQ records that lid went to a DLQ now (if it had not before). w.mu held.
func (w *world) markDLQ(lid int) {
	w.deadLettered[lid] = true
	now := time.Since(w.start)
	if _, ok := w.dlqAt[lid]; !ok {
		w.dlqAt[lid] = now
	}
	w.moves[lid] = append(w.moves[lid], now)
}

// tr appends to a logical message's story. Called with w.mu held.
func (w *world) tr(lid int, format string, args ...any) {
	w.trace[lid] = append(w.trace[lid], fmt.Sprintf("+%s ", time.Since(w.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

// deadEnd reports whether a message must end in its DLQ, never applied.
func (s *msgSpec) deadEnd() bool {
	return s.poison || s.conflict || s.invalid || s.lim.dead() || s.refused
}

// lidOf reads the logical id out of a body: the number after
// "amount_cents": (the sim writes it before any padding, so a large body
// costs no parse).
func lidOf(body string) string {
	const field = `"amount_cents":`
	i := strings.Index(body, field)
	if i < 0 {
		return "?"
	}
	rest := body[i+len(field):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 {
		return "?"
	}
	return rest[:j]
}

func lidNum(body string) int {
	n, _ := strconv.Atoi(lidOf(body))
	return n
}

func (w *world) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf("+%s ", time.Since(w.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (w *world) stat(name string, n int) {
	w.mu.Lock()
	w.stats[name] += n
	w.mu.Unlock()
}

func isDLQ(q string) bool { return q == dlq1Name || q == dlq2Name }

// ---------------------------------------------------------------- observations

// observeReceive notes what a receive brought.
func (w *world) observeReceive(p *proc, q string, ms []types.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	who := "ESM"
	if p != nil {
		who = p.id
	}
	for _, m := range ms {
		lid := lidNum(aws.ToString(m.Body))
		w.msgLid[aws.ToString(m.MessageId)] = lid
		w.tr(lid, "%s received %s from %s (receive count %s, dedup id %s)", who, aws.ToString(m.MessageId), q,
			m.Attributes["ApproximateReceiveCount"], m.Attributes["MessageDeduplicationId"])
		switch {
		case isDLQ(q):
			w.worldMoved(aws.ToString(m.MessageId), lid)
			w.markDLQ(lid)
		default:
			w.lastSrcRecv[aws.ToString(m.MessageId)] = time.Since(w.start)
			w.delivered(p, lid, m)
		}
	}
	if !isDLQ(q) {
		w.noteRecv(p, time.Since(w.start), ms)
	}
}

func (w *world) observeSend(p *proc, q, body, msgID, dedupID string) {
	lid := lidNum(body)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tr(lid, "%s sent a copy to %s: message id %s, dedup id %s", p.id, q, msgID, dedupID)
	switch {
	case isDLQ(q):
		w.judgeCopy(p, q, lid)
		w.dlqSent[lid] = true
		if src, ok := strings.CutPrefix(dedupID, "dlq-"); ok {
			w.dlqSrc[lid] = src // the id the worker's "moved to the dead-letter queue" line logs
		}
		w.dlqSentLast[lid] = time.Since(w.start)
		w.noteArrived(msgID, time.Since(w.start))
		w.markDLQ(lid)
		w.evt++
		w.moveEvt[lid] = append(w.moveEvt[lid], w.evt)
		w.stats["path: DLQ move (product)"]++
	case strings.HasPrefix(p.id, "redrive"):
		w.redriven[lid] = true
		w.noteCopy(lid, msgID, dedupID)
		if _, ok := w.redrivenAt[lid]; !ok {
			w.redrivenAt[lid] = time.Since(w.start)
		}
		w.redrives[lid] = append(w.redrives[lid], time.Since(w.start))
		w.evt++
		w.redriveEvt[lid] = append(w.redriveEvt[lid], evtBy{w.evt, p.id})
		w.copyEvt[msgID] = evtBy{w.evt, p.id}
		w.stats["path: redrive copy"]++
	}
}

// lidOfReceipt names the logical message of a receipt handle: a stable
// identity for fault decisions (SQS message ids are random).
func (w *world) lidOfReceipt(h string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lid, ok := w.msgLid[receiptID(h)]; ok {
		return strconv.Itoa(lid)
	}
	return "?"
}

func (w *world) checkDelete(p *proc, q, receipt string) {
	id := receiptID(receipt)
	w.mu.Lock()
	lid, ok := w.msgLid[id]
	if ok {
		w.tr(lid, "%s deletes %s from %s", p.id, id, q)
		w.noteDelete(p, lid, id)
	}
	okDel := w.committed[lid] || w.dlqSent[lid]
	if isDLQ(q) {
		okDel = w.redriven[lid]
	}
	w.mu.Unlock()
	if ok && !okDel {
		w.violate("message %s (logical %d) of %s deleted by %s before its record committed (nor dead-lettered/redriven); its story: %s", id, lid, q, p.id, w.storyOf(lid))
	}
}

// checkKey: every claim is made under the key of a message of the workload,
// scoped as its queue deduplicates (per group on both source queues). Any
// other key means a process scoped a message's key otherwise (hole 3: a
// Lambda handler keying a queue it was not told about by the default scope),
// and its duplicates across processes go unrecognised.
func (w *world) checkKey(p *proc, item map[string]ddbtypes.AttributeValue) {
	key := pkOf(item)
	if key == preflightKey || w.byKey[key] != nil {
		return
	}
	id := dedup.GetS(item, dedup.AttrMessageID)
	w.mu.Lock()
	lid, ok := w.msgLid[id]
	w.mu.Unlock()
	want := "?"
	if s := w.byLid[lid]; ok && s != nil {
		want = s.key
	}
	w.violate("key scope: %s claimed %s for message %s (logical %d), which is no message's key (want %s): keyed otherwise than its queue deduplicates", p.id, key, id, lid, want)
}

// preflightKey is the item the product's start-up preflight writes (never: its condition cannot hold).
const preflightKey = "exactly-preflight"

func (w *world) observeClaim(p *proc, key string) {
	s := w.byKey[key]
	if s == nil {
		return
	}
	w.mu.Lock()
	reopened := w.reopened(p, key)
	w.tr(s.lid, "%s claimed %s", p.id, key)
	w.stats["dynamo: claim written"]++
	w.mu.Unlock()
	if reopened {
		w.violate("COMPLETED record %s (logical %d) reopened by a claim of %s", key, s.lid, p.id)
	}
}

func (w *world) observeCommit(p *proc, key string, tx bool) {
	s := w.byKey[key]
	if s == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed[s.lid] = true
	w.tr(s.lid, "%s committed %s (applied: %v)", p.id, key, tx)
	p.mu.Lock()
	delete(p.open, key)
	p.mu.Unlock()
	if !tx || (s.lim != nil && s.queue != q1Name) {
		return // a claim-mode commit with writes (limits.go): its downstream call counts
	}
	w.applied[s.lid]++
	w.callers[s.lid] = append(w.callers[s.lid], p.id)
	if w.applied[s.lid] == 1 {
		k := s.queue + "|" + s.group
		w.order[k] = append(w.order[k], s.lid)
		w.appliedAt[s.lid] = time.Since(w.start)
		w.appliedVia[s.lid] = p.ranOf(s.key)
	} else if w.granted(s.lid) {
		w.stats["window: applied again past its record's TTL (DESIGN.md, What it guarantees: while its record lives)"]++
	} else {
		w.violations = append(w.violations, fmt.Sprintf("+%s transactional mode: logical %d (%s) applied %d times (by %v)",
			time.Since(w.start).Round(time.Millisecond), s.lid, key, w.applied[s.lid], w.callers[s.lid]))
	}
}

// downstream records a claim-mode effect's outside call.
func (w *world) downstream(p *proc, s *msgSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied[s.lid]++
	w.callers[s.lid] = append(w.callers[s.lid], p.id)
	p.mu.Lock()
	p.open[s.key] = true
	p.mu.Unlock()
	if w.effectBy == nil {
		w.effectBy = map[string]*proc{}
	}
	w.effectBy[s.key] = p
	w.stats["downstream calls"]++
	if w.applied[s.lid] == 1 {
		k := s.queue + "|" + s.group
		w.order[k] = append(w.order[k], s.lid)
		w.appliedAt[s.lid] = time.Since(w.start)
		w.appliedVia[s.lid] = p.ranOf(s.key)
		return
	}
	switch {
	case w.granted(s.lid):
		w.stats["window: called again past its record's TTL (DESIGN.md, What it guarantees: while its record lives)"]++
	case w.excused[s.lid]:
		w.stats["window: claim mode, called again after a death, a stall or a lost commit between the call and its commit (DESIGN.md, What it does not guarantee)"]++
	default:
		w.violations = append(w.violations, fmt.Sprintf("+%s claim mode: downstream called %d times for logical %d (%s) by %v, and no worker died, stalled or lost its commit between an effect and its commit; faults on the key: %s",
			time.Since(w.start).Round(time.Millisecond), w.applied[s.lid], s.lid, s.key, w.callers[s.lid], w.faultsOn(s.key)))
	}
}

// faultsOn lists the faults injected so far on calls about key.
func (w *world) faultsOn(key string) string {
	var out []string
	for _, f := range w.inj.Injected() {
		if strings.Contains(f.ID, "|"+key+"|") {
			out = append(out, fmt.Sprintf("%s %s by %s at +%s", f.Kind, f.ID, f.Proc, f.At.Round(time.Millisecond)))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// faultOnKey: a fault hit a ledger call of p on key; if p's effect for it
// ran and its commit has not been seen, and the fault stalls p (a pause, or
// a call that answers past the lease), the documented window is open. A
// ledger call that fails or loses its answer opens nothing by itself: the
// commit is retried with the same claim while the heartbeat keeps the
// lease; only a heartbeat that cannot extend the lease or a commit that
// gives up does (see logCounter).
func (w *world) faultOnKey(p *proc, key string, k Kind) {
	if k != Pause && k != Slow {
		return
	}
	s := w.byKey[key]
	if s == nil {
		return
	}
	p.mu.Lock()
	open := p.open[key]
	p.mu.Unlock()
	if open {
		w.mu.Lock()
		w.excused[s.lid] = true
		w.mu.Unlock()
	}
}

func (w *world) crash(p *proc, why string) {
	if p.dead.Swap(true) {
		return
	}
	p.mu.Lock() // never while holding w.mu: the order is w.mu, then p.mu
	var open []string
	for key := range p.open {
		open = append(open, key)
	}
	p.mu.Unlock()
	w.mu.Lock()
	for _, key := range open {
		if s := w.byKey[key]; s != nil {
			w.excused[s.lid] = true
		}
	}
	w.mu.Unlock()
	w.stat("process: died ("+strings.SplitN(why, " ", 2)[0]+")", 1)
	p.kill()
}

// ---------------------------------------------------------------- set-up

// perGroup: Q2 deduplicates per message group (so that the Lambda handler,
// which is not told about it, must read its scope); Q1 too, unless the
// shape makes it queue-scoped.
func (w *world) perGroup(q string) bool {
	return !w.std(q) && (q == q2Name || (q == q1Name && !w.shape.Q1QueueScoped))
}

func newWorld(ctx context.Context, cfg Config) (*world, error) {
	w := &world{
		cfg: cfg, shape: drawShape(cfg),
		db: memdynamo.New(), urls: map[string]string{}, arns: map[string]string{},
		start: time.Now(), ctx: ctx, byLid: map[int]*msgSpec{}, byKey: map[string]*msgSpec{},
		msgLid: map[string]int{}, committed: map[int]bool{}, applied: map[int]int{}, callers: map[int][]string{},
		order: map[string][]int{}, excused: map[int]bool{}, deadLettered: map[int]bool{}, dlqSent: map[int]bool{}, dlqSentLast: map[int]time.Duration{},
		redriven: map[int]bool{}, stats: map[string]int{}, trace: map[int][]string{},
		appliedAt: map[int]time.Duration{}, appliedVia: map[int]string{}, dlqAt: map[int]time.Duration{}, lastSrcRecv: map[string]time.Duration{}, redrivenAt: map[int]time.Duration{}, moves: map[int][]time.Duration{}, redrives: map[int][]time.Duration{}, moveEvt: map[int][]int{}, redriveEvt: map[int][]evtBy{}, copyEvt: map[string]evtBy{}, dlqSrc: map[int]string{},
		wide: newWidened(cfg.Seed), copies: newCopies(),
		receipts: map[string]*rcpt{}, lastRecv: map[string]recvd{}, recvByProc: map[string]int{}, rejected: map[string]int{}, rejectedAt: map[string]time.Duration{}, dlqTry: map[string]time.Duration{},
	}
	w.seq = newSequencer(cfg)
	w.sqs = memsqs.New(memsqs.WithIDs(rand.NewPCG(cfg.Seed, 0x5e95)), memsqs.WithDuplicates(w.duplicate), memsqs.WithWake(w.seq.woke))
	w.inj = newInjector(cfg.Seed, w.shape.Rate, w.shape.Kinds, w.shape.Ops, cfg.Only)
	w.inj.stall = w.shape.maxVis()
	if cfg.Swarm {
		for _, c := range w.shape.choices() {
			w.stats["shape: "+c] = 1
		}
	}
	_, err := w.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		return nil, err
	}
	// TTL on, as the Lambda handler's start-up check wants it.
	if _, err := w.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)}}); err != nil {
		return nil, err
	}
	go w.sweeper(ctx) // ttlsweep.go: ends with the run's context
	mk := func(name string, attrs map[string]string) error {
		out, err := w.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(w.realName(name)), Attributes: w.queueAttrs(name, attrs)})
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		w.urls[name] = aws.ToString(out.QueueUrl)
		a, err := w.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return err
		}
		w.arns[name] = a.Attributes["QueueArn"]
		return nil
	}
	redrivePolicy := func(dlq string) string {
		return `{"deadLetterTargetArn":"` + w.arns[dlq] + `","maxReceiveCount":"` + strconv.Itoa(w.maxReceive()) + `"}`
	}
	for _, err := range []error{
		mk(dlq1Name, map[string]string{}),
		mk(dlq2Name, map[string]string{}),
	} {
		if err != nil {
			return nil, err
		}
	}
	q1Scope, q1Limit := "messageGroup", "perMessageGroupId"
	if w.shape.Q1QueueScoped {
		q1Scope, q1Limit = "queue", "perQueue"
	}
	if err := mk(q1Name, map[string]string{"VisibilityTimeout": strconv.Itoa(int(w.shape.Vis1 / time.Second)), "DeduplicationScope": q1Scope, "FifoThroughputLimit": q1Limit, "RedrivePolicy": redrivePolicy(dlq1Name)}); err != nil {
		return nil, err
	}
	if err := mk(q2Name, map[string]string{"VisibilityTimeout": "30", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId", "RedrivePolicy": redrivePolicy(dlq2Name)}); err != nil {
		return nil, err
	}
	w.workload()
	w.obWorkload()
	w.limWorkload()
	if err := w.limSetup(ctx); err != nil {
		return nil, err
	}
	w.carrierKeys()
	if err := w.refusedWorkload(ctx); err != nil {
		return nil, err
	}
	w.worldStats()
	return w, nil
}

// workload builds the logical messages and their sends from the seed.
func (w *world) workload() {
	r := func(parts ...string) uint64 { return hash64(w.cfg.Seed, append([]string{"workload"}, parts...)...) }
	lid := 0
	for qi, q := range []string{q1Name, q2Name} {
		for g := range groupsPerQ {
			group := fmt.Sprintf("g%d", g)
			var t time.Duration
			for i := range msgsPerGroup {
				lid++
				id := strconv.Itoa(lid)
				s := &msgSpec{lid: lid, queue: q, group: group, gseq: i}
				if w.std(q) {
					// No groups: each message its own account (standard.go).
					s.group = fmt.Sprintf("%s.%d", group, i)
				}
				x := r(id)
				switch {
				case x%100 < 6:
					s.poison = true
				case qi == 0 && g < 2 && i < 3 && x%100 < 70:
					// The first messages of two groups of Q1 fail until
					// they are fixed, then are redriven: several of one
					// group in the DLQ together.
					s.fixable = true
				}
				s.dedupID = "d" + id
				if (x>>8)%3 == 0 || w.std(q) {
					s.keyAttr = "k" + id // always on a standard queue (standard.go)
				}
				if (x>>16)%5 == 0 && g%2 == 1 && w.perGroup(q) {
					// The same dedup id as the message of the previous
					// group at the same position: distinct messages on a
					// messageGroup-scoped queue (Q1, and Q2, the Lambda's).
					s.dedupID = fmt.Sprintf("shared-%d-%d", g-1, i)
					s.keyAttr = ""
					if prev := w.byLid[lid-msgsPerGroup]; prev != nil && prev.keyAttr == "" && !prev.conflict {
						prev.dedupID = s.dedupID
						prev.key = dedup.Scope{Namespace: namespace, Queue: q, PerGroup: true}.Key(prev.group, prev.dedupID)
						for j := range prev.sends {
							prev.sends[j].dedupID = prev.dedupID
						}
						// both poison or both not: the DLQ copies collide then
						s.poison = prev.poison || (x>>24)%4 == 0
						prev.poison = s.poison
						prev.fixable = prev.fixable && !prev.poison
						prev.invalid = false
						s.fixable = false
					}
				}
				if prev := w.byLid[lid-1]; i > 0 && prev != nil && prev.keyAttr != "" && !prev.poison && !prev.fixable && !prev.conflict && !prev.invalid &&
					!s.poison && !s.fixable && !w.shape.MixedPayload && (x>>32)%10 == 0 {
					s.conflict, s.keyAttr = true, prev.keyAttr
				}
				if qi == 0 && !s.poison && !s.fixable && !s.conflict && !strings.HasPrefix(s.dedupID, "shared-") && r(id, "invalid")%100 < 5 {
					s.invalid = true
				}
				near, by := w.nearExpiry(lid)
				switch {
				case s.conflict && near:
					// Near the expiry of the record it conflicts with
					// (ttlsweep.go: freezeAcrossSweep).
					t += shortTTL(w.cfg.Seed) - by
				case s.fixable:
					t += time.Duration(1+r(id, "gap")%10) * time.Second
				case w.shape.Burst && qi == 1 && g%2 == 0:
					// A burst: the group's messages within a second or two
					// of each other, so that one Lambda batch holds several
					// (the FIFO partial-batch rule).
					t += time.Duration(r(id, "gap")%1500) * time.Millisecond
				default:
					t += time.Duration(5+r(id, "gap")%80) * time.Second
				}
				raw := s.keyAttr
				if raw == "" {
					raw = s.dedupID
				}
				s.key = dedup.Scope{Namespace: namespace, Queue: w.realName(q), PerGroup: w.perGroup(q)}.Key(s.group, raw)
				acct := q[:2] + "-" + s.group
				s.body = fmt.Sprintf(`{"account":%q,"amount_cents":%d}`, acct, lid)
				if w.shape.Pad > 0 {
					s.body = fmt.Sprintf(`{"account":%q,"amount_cents":%d,"pad":"`, acct, lid) + strings.Repeat("x", w.shape.Pad) + `"}`
				}
				s.sends = []send{{at: t, dedupID: s.dedupID, kind: "original"}}
				if y := r(id, "dups"); y%4 == 0 {
					s.sends = append(s.sends, send{at: t + time.Duration(1+y%50)*time.Second, dedupID: s.dedupID, kind: "dup-in-window"})
				}
				if y := r(id, "late"); y%5 == 0 && !s.fixable {
					s.sends = append(s.sends, send{at: t + 6*time.Minute + time.Duration(y%600)*time.Second, dedupID: s.dedupID, kind: "dup-after-window"})
				}
				if y := r(id, "newid"); y%4 == 0 && s.keyAttr != "" && !s.fixable {
					s.sends = append(s.sends, send{at: t + time.Duration(10+y%600)*time.Second, dedupID: s.dedupID + "-retry", kind: "dup-new-dedup-id"})
				}
				w.msgs = append(w.msgs, s)
				w.byLid[lid] = s
			}
		}
	}
	for _, s := range w.msgs {
		if !s.conflict {
			w.byKey[s.key] = s
		}
	}
}

// produce sends the workload (a producer; its calls are not faulted).
func (w *world) produce(ctx context.Context) {
	type ev struct {
		s *msgSpec
		send
	}
	var evs []ev
	for _, s := range w.msgs {
		for _, x := range s.sends {
			evs = append(evs, ev{s, x})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	for _, e := range evs {
		if d := e.at - time.Since(w.start); d > 0 {
			time.Sleep(d)
		}
		w.seq.step("producer", "SendMessage", strconv.Itoa(e.s.lid)+"|"+e.kind)
		if _, err := w.sqs.SendMessage(ctx, w.sendInput(e.s, e.send)); err != nil {
			w.violate("producer: send %d: %v", e.s.lid, err)
		}
		w.stat("workload: "+e.kind, 1)
	}
}

// ---------------------------------------------------------------- processes

// logger counts what the product logs at Info and above: the code paths.
// With Config.Logs it also keeps every line, Debug and up, named by its
// process (Result.Logs).
type logCounter struct {
	w     *world
	proc  string
	p     *proc
	attrs []slog.Attr
}

func (h logCounter) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || (h.w.cfg.Logs && l >= slog.LevelDebug)
}

func (h logCounter) Handle(_ context.Context, r slog.Record) error {
	// A process that crashed says nothing more (a real one is gone). What
	// its goroutines, woken together by its cancellation, log on their
	// way out is not counted: their order is the runtime's.
	count := !h.p.dead.Load()
	if h.w.cfg.Logs {
		h.keep(r, count)
		if r.Level < slog.LevelInfo {
			return nil
		}
	}
	if r.Message == "batch done" {
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "applied", "duplicates", "busy", "conflicts", "leases_lost", "moved_to_dlq", "retried", "permanent_failures", "not_started":
				if n := a.Value.Int64(); n > 0 && count {
					h.w.stat("lambda: "+a.Key, int(n))
				}
			}
			return true
		})
		return nil
	}
	if count {
		h.w.stat("log: "+r.Message, 1)
	}
	switch r.Message {
	case "commit gave up", "cannot extend lease":
		// The documented window: the lease may end before the commit.
		if r.Message == "commit gave up" && !h.w.judgeGaveUp(h.p, r) {
			return nil
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "key" {
				h.w.excuseCalled(a.Value.String())
			}
			return true
		})
	}
	return nil
}

// excuseCalled opens the documented window for key's message when its
// downstream has been called: a heartbeat could not extend the lease, or a
// commit gave up, after a call.
func (w *world) excuseCalled(key string) {
	s := w.byKey[key]
	if s == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.applied[s.lid] > 0 {
		w.excused[s.lid] = true
	}
}

// keep records r's line, with the logger's attributes and its own.
func (h logCounter) keep(r slog.Record, alive bool) {
	var b strings.Builder
	dead := ""
	if !alive {
		dead = " (dead)"
	}
	fmt.Fprintf(&b, "+%s %s%s %s: %s", time.Since(h.w.start).Round(time.Millisecond), h.proc, dead, r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.w.logMu.Lock()
	h.w.logs = append(h.w.logs, b.String())
	h.w.logMu.Unlock()
	if s := h.w.seq; s != nil && s.logOn { // among the steps, to the nanosecond
		s.mu.Lock()
		s.log = append(s.log, time.Now().Format("15:04:05.000000000")+" log "+b.String())
		s.mu.Unlock()
	}
}

func (h logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	if h.w.cfg.Logs {
		h.attrs = append(slices.Clip(h.attrs), as...)
	}
	return h
}
func (h logCounter) WithGroup(string) slog.Handler { return h }

// log is the logger of process p's product code.
func (w *world) log(p *proc) *slog.Logger { return slog.New(logCounter{w: w, proc: p.id, p: p}) }
func (w *world) skew(id string) time.Duration {
	return time.Duration(int64(hash64(w.cfg.Seed, "skew", id)%uint64(2*maxSkew)) - int64(maxSkew))
}

// effectFor is the effect of one process: the transactional ledger on Q1, a
// claim-mode effect that calls a "downstream" (recorded) on Q2.
func (w *world) effectFor(p *proc, now func() time.Time) effect.Effect {
	return effect.Func(w.effectFn(p, now))
}

// effectFn is effectFor's function: a pool worker of Q1 declares it
// effect.WritesOnly (its whole effect is the ledger's writes).
func (w *world) effectFn(p *proc, now func() time.Time) func(context.Context, effect.Input) (effect.Output, error) {
	ledger := &builtin.Ledger{Table: table, Now: now}
	return func(ctx context.Context, in effect.Input) (effect.Output, error) {
		s := w.byLid[lidNum(in.Message.Body)]
		if s == nil {
			return effect.Output{}, effect.Permanent(errors.New("sim: unknown message"))
		}
		if s.conflict {
			// It won the claim: the message whose key it reuses has not
			// committed yet (it may have gone to the DLQ by the redrive
			// policy meanwhile). The downstream refuses a key reused for
			// another payload, as an HTTP 422 would: permanent.
			w.stat("workload: conflict message reached its effect first (refused downstream)", 1)
			w.permanent(p, s.lid, "effect: conflict refused downstream")
			return effect.Output{}, effect.Permanent(fmt.Errorf("sim: key of message %d reused by conflict message %d", s.lid-1, s.lid))
		}
		if s.poison || (s.fixable && time.Since(w.start) < fixedAt) {
			w.permanent(p, s.lid, "effect: poison")
			return effect.Output{}, effect.Permanent(fmt.Errorf("sim: poison message %d", s.lid))
		}
		// The effect takes time: Q1's sometimes longer than the visibility
		// timeout (the keeper and the heartbeat must hold the message),
		// Q2's well inside the Lambda function's timeout.
		x := hash64(w.cfg.Seed, "latency", strconv.Itoa(s.lid))
		d := time.Duration(x%2000) * time.Millisecond
		if logicalQ(in.Message.QueueName) == q1Name && x%100 < 15 {
			d = 20*time.Second + time.Duration(x%30000)*time.Millisecond
		}
		if s.lim != nil && s.queue == q1Name {
			d = limLatency // sent together, they commit together (limits.go)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		if ctx.Err() != nil { // also when it ended as the effect did: select picks at random
			w.retryable(p, s.lid, "effect's context ended")
			return effect.Output{}, ctx.Err()
		}
		p.step("effect", in.Key)
		p.mu.Lock()
		p.ran[in.Key] = in.Message.ID
		p.mu.Unlock()
		if logicalQ(in.Message.QueueName) == q1Name {
			out, err := w.ledgerApply(ctx, p, ledger, in, s)
			out = w.refusedWrite(p, s, out, err)
			if err == nil && s.lim != nil {
				return w.limApply(p, in, s, out), nil
			}
			if err == nil && s.invalid && len(out.Writes) > 0 {
				// The same item written twice: DynamoDB rejects the
				// transaction with a ValidationException.
				out.Writes = append(out.Writes, out.Writes[0])
			}
			return out, err
		}
		if w.flakyFirst(s) {
			// A downstream that fails retryably at first (a 503): the
			// message is retried, and in a Lambda batch the rest of its
			// group with it (the FIFO partial-batch rule).
			return effect.Output{}, fmt.Errorf("sim: downstream unavailable for message %d (503)", s.lid)
		}
		if s.lim.dead() {
			// A commit that cannot be made: no downstream call (limits.go).
			return w.limApply(p, in, s, effect.Output{Result: []byte("sent")}), nil
		}
		k, id, err := p.before(ctx, "Effect", in.Key)
		if err != nil {
			w.retryable(p, s.lid, "downstream call failed")
			return effect.Output{}, err
		}
		// As an HTTP request made with the effect's context would: a
		// context that ended (the lease is ending unconfirmed, or lost)
		// sends nothing.
		if err := ctx.Err(); err != nil {
			return effect.Output{}, context.Cause(ctx)
		}
		w.downstream(p, s)
		if err := p.after(ctx, "Effect", k, id); err != nil {
			return effect.Output{}, err
		}
		if s.lim != nil {
			return w.limApply(p, in, s, effect.Output{Result: []byte("sent")}), nil
		}
		return effect.Output{Result: []byte("sent")}, nil
	}
}

// esm drives Lambda invocations like an event source mapping with
// ReportBatchItemFailures: receive a batch, invoke with the function's
// timeout, delete what was not reported. Its own calls are AWS's: not faulted.
// Poller n invokes one execution environment (a container) at a time and
// keeps it warm between batches; a container whose invocation timed out or
// whose process died is gone, and the next batch starts a new one (a cold
// start).
// onTheDeadline lets what the deadline woke in the function (its
// context's end) run before the function is judged: they woke together,
// and the runtime would pick which goes first (whether the function
// answered on the deadline, whether its lines then came from a live
// process). 1 ns later, everything due at the deadline has run.
func onTheDeadline() { time.Sleep(time.Nanosecond) }

func (w *world) esm(ctx context.Context, n int) {
	q := w.urls[q2Name]
	var c *container
	esm := fmt.Sprintf("esm%d", n)
	for cold, polls := 0, 0; ctx.Err() == nil; polls++ {
		w.seq.step(esm, "ReceiveMessage", "")
		out, err := w.sqs.ReceiveMessage(withCallID(ctx, esm, "ReceiveMessage", strconv.Itoa(polls)), &sqs.ReceiveMessageInput{
			QueueUrl: &q, MaxNumberOfMessages: int32(w.shape.LambdaBatch), WaitTimeSeconds: 20,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		at := time.Since(w.start)
		w.observeReceive(nil, q2Name, out.Messages)
		if c == nil || c.p.dead.Load() {
			p := w.newProc(fmt.Sprintf("λ%d.%d", n, cold))
			c = w.coldStart(ctx, p)
			cold++
			if c == nil {
				// The init failed: the invocation fails, and its records
				// come back after the visibility timeout, as in Lambda.
				w.stat("lambda: invocation failed (cold start)", 1)
				w.noteRecv(p, at, out.Messages)
				continue
			}
		}
		w.invoke(ctx, c, out.Messages, esm)
		w.noteRecv(c.p, at, out.Messages)
	}
}

// container is a Lambda execution environment: one process, its clients
// and the handler its cold start built.
type container struct {
	p *proc
	h *exactly.LambdaHandler
}

// coldStart builds a container's handler as a Lambda function does in its
// init phase: exactly.NewLambdaHandler with the process's faulty clients, on
// a queue it is not told about (Config.Queues empty: the handler reads the
// event source queue's attributes at its first event) and DLQ moves on.
// Start-up calls see faults; NewLambdaHandler rides out transient errors,
// within Lambda's init limit (lambdaInit). An init that fails or runs past
// the limit leaves no container (nil): the process is dead. The ledger's
// clock is the process's, skewed (Config.Test.Now), and its jitter is drawn
// from the seed (Config.Test.Rand).
func (w *world) coldStart(ctx context.Context, p *proc) *container {
	w.stat("lambda: cold starts", 1)
	skew := w.skew(p.id)
	now := func() time.Time { return time.Now().Add(skew) }
	cfg := exactly.Config{
		SQS: &faultySQS{p: p, inner: w.sqs}, DynamoDB: &faultyDynamo{p: p, inner: w.db},
		Table: table, Effect: w.effectFor(p, now), Namespace: namespace, TTL: w.wide.ttl, Logger: w.log(p),
		LeaveToRedrivePolicy: false, // moves to the DLQ on
		Queues:               nil,   // the event source queue is not listed
		Test:                 w.testSeam(p.id, now),
		PayloadHash:          w.payloadOf(p.id),
		Lambda:               exactly.LambdaConfig{FailRest: w.shape.FailRest},
	}
	w.believe(&cfg.Test, p)
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lambdaInit)
	defer cancel()
	p.kill = cancel
	type built struct {
		h   *exactly.LambdaHandler
		err error
	}
	done := make(chan built, 1)
	w.wg.Go(func() {
		h, err := exactly.NewLambdaHandler(ictx, cfg)
		done <- built{h, err}
	})
	var b built
	select {
	case b = <-done:
	case <-ictx.Done():
		onTheDeadline()
		select {
		case b = <-done:
		default:
			w.crash(p, "init-timeout: the cold start ran past Lambda's init limit")
		}
	}
	switch {
	case p.dead.Load():
		return nil
	case b.err != nil:
		// The deployment is well configured: a ConfigError with no fault
		// injected is the sim's or the product's bug. With one, it is an
		// injected error the product cannot class as transient (the sim's
		// errors are not the SDK's: a lost answer or a reset is a plain
		// error here, retryable there) and start-up gives up, as it would.
		var ce *exactly.ConfigError
		if errors.As(b.err, &ce) && p.faults.Load() == 0 {
			w.violate("%s: NewLambdaHandler: configuration error on the simulated deployment, no fault injected: %v", p.id, b.err)
		}
		w.stat("lambda: cold start failed", 1)
		p.dead.Store(true)
		return nil
	}
	return &container{p: p, h: b.h}
}

// It returns the ids of the messages the invocation reported as batch item
// failures (nil when the invocation itself failed).
func (w *world) invoke(ctx context.Context, c *container, msgs []types.Message, esm string) map[string]bool {
	p := c.p
	ev := events.SQSEvent{}
	w.mu.Lock()
	for _, m := range msgs {
		w.delivered(p, lidNum(aws.ToString(m.Body)), types.Message{})
	}
	w.mu.Unlock()
	for _, m := range msgs {
		rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSourceARN: w.arns[q2Name], MessageAttributes: map[string]events.SQSMessageAttribute{}}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		ev.Records = append(ev.Records, rec)
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lambdaTO)
	defer cancel()
	p.kill = cancel
	done := make(chan events.SQSEventResponse, 1)
	w.wg.Go(func() {
		r, _ := c.h.Handle(ictx, ev)
		done <- r
	})
	var resp events.SQSEventResponse
	select {
	case resp = <-done:
	case <-ictx.Done():
		onTheDeadline()
		select {
		case resp = <-done: // it answered on the deadline
		default:
			w.crash(p, "timeout: the invocation ran past the function timeout")
		}
	}
	if p.dead.Load() {
		w.stat("lambda: invocation failed", 1)
		return nil // an invocation error: the whole batch comes back after the visibility timeout
	}
	// The invocation answered: every effect of it has committed or given up
	// (its log line opened the window then). A key left open must not be
	// excused by a later invocation's death in this container.
	p.mu.Lock()
	clear(p.open)
	p.mu.Unlock()
	w.stat("lambda: invocations", 1)
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var dels []types.DeleteMessageBatchRequestEntry
	w.seq.step(esm, "DeleteMessageBatch", "")
	for i, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			continue
		}
		w.checkDelete(p, q2Name, aws.ToString(m.ReceiptHandle))
		dels = append(dels, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(dels) > 0 {
		_, _ = w.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(w.urls[q2Name]), Entries: dels})
	}
	return failed
}

// redriveDLQ1 is the operator's redrive of DLQ1 into Q1 mid-run.
func (w *world) redriveDLQ1(ctx context.Context) {
	time.Sleep(redriveAt - time.Since(w.start))
	w.redrive(ctx, dlq1Name, q1Name, "redrive")
}

// redrive empties dlq into q with the product's redrive, as an operator
// does: rerun after a failure, as its error message asks, and once more past
// the redrive's visibility timeout until a run finds nothing old left to
// move (a message whose delete failed comes back then). Its processes are
// named after name (a name starting "redrive": observeSend).
func (w *world) redrive(ctx context.Context, dlq, q, name string) {
	before := time.Now()
	for try := 0; try < 40 && ctx.Err() == nil; try++ {
		p := w.newProc(fmt.Sprintf("%s.%d", name, try))
		sq := &faultySQS{p: p, inner: w.sqs}
		rctx, cancel := context.WithCancel(ctx)
		p.kill = cancel
		res, err := redrive.Run(rctx, sq, redrive.Config{DLQ: w.urls[dlq], Queue: w.urls[q], Before: before})
		cancel()
		w.stat("redrive: runs", 1)
		w.stat("redrive: moved", res.Moved)
		if err == nil && !p.dead.Load() && res.Moved == 0 {
			return
		}
		if err != nil || p.dead.Load() {
			w.stat("redrive: failed runs", 1)
		}
		time.Sleep(61 * time.Second)
	}
}

// settled reports whether the source queues are empty and nothing is in
// flight in the DLQs (a redrive that died, or whose hand-back failed, hides
// what it received for its visibility timeout).
func (w *world) settled(ctx context.Context) bool {
	w.seq.step("settle", "GetQueueAttributes", "")
	for _, q := range []string{dlq1Name, dlq2Name} {
		a, err := w.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.urls[q]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil || a.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] != "0" {
			return false
		}
	}
	for _, q := range []string{q1Name, q2Name} {
		a, err := w.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.urls[q]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			return false
		}
		for _, n := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
			if a.Attributes[string(n)] != "0" {
				return false
			}
		}
	}
	return true
}

// drain empties a queue with the world's client and returns the logical ids it held.
func (w *world) drain(ctx context.Context, name string) []int {
	var lids []int
	for range 1000 {
		out, err := w.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(w.urls[name]), MaxNumberOfMessages: 10, VisibilityTimeout: 43200})
		if err != nil || len(out.Messages) == 0 {
			break
		}
		var dels []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			lids = append(lids, lidNum(aws.ToString(m.Body)))
			w.mu.Lock()
			w.worldMoved(aws.ToString(m.MessageId), lidNum(aws.ToString(m.Body)))
			w.mu.Unlock()
			dels = append(dels, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		// Deleted at once: in a FIFO queue the rest of a group stays
		// blocked while some of it is in flight.
		if _, err := w.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(w.urls[name]), Entries: dels}); err != nil {
			w.violate("drain %s: %v", name, err)
			break
		}
	}
	return lids
}

// maxReceive is the queues' maxReceiveCount: 10, or 30 in a shape with
// bursts. A burst group's messages come in one receive (one Lambda batch);
// behind a message that is retried (busy behind a stalled holder's live
// lease, a downstream that fails at first) the rest of the group is
// reported unstarted, and each of those receives counts: ten are soon
// spent, and SQS's redrive policy moves messages never tried, as an
// operator who sized maxReceiveCount for single messages would see. An
// operator running bursty FIFO groups behind Lambda sets it higher. The same
// holds for the outbox half's groups (up to 12 on Q2) when a Lambda batch
// takes several of them and a failure fails the rest of the batch
// (FailRest "batch"): behind one record busy on a crashed invocation's
// live claim, the other groups' messages are reported unstarted at every
// receive, and messages of other groups may be moved after ten such
// receives, none of them tried. And in the outbox half's read-pages
// worlds (limits.go): 110 messages of 11 groups reach Q2 within seconds,
// Lambda batches take several groups, and behind one retried record the
// others come back unstarted (ten receives can pass in five minutes,
// none tried).
func (w *world) maxReceive() int {
	if w.shape.Burst || (w.shape.Outbox.On && w.shape.FailRest == "batch" && w.shape.LambdaBatch > 1) || w.shape.Outbox.Pages {
		return 30
	}
	return maxReceive
}
