package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Result of one run.
type Result struct {
	Violations []string
	Faults     []Fault
	Stats      map[string]int
	Virtual    time.Duration // virtual time the run took
	// Trace is every logical message's SQS story, in logical order: with
	// Faults and Stats, what a replay of the seed must reproduce.
	Trace []string
	Shape string   // the world's shape (swarm.go)
	Steps []string // the sequencer's steps, with Config.LogSteps
	// Record is every step the sequencer took, in order (a recording's,
	// record.go); Diverged, when replaying one (Config.Want), the first
	// step that is not the recorded one.
	Record   []Step
	Diverged *Divergence
	// Logs: every process's log lines, in order, with Config.Logs.
	Logs []string
}

// Failed reports whether an invariant broke.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// run runs one simulation. It must be called inside a synctest bubble.
func run(cfg Config) Result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := newWorld(ctx, cfg)
	if err != nil {
		return Result{Violations: []string{"set-up: " + err.Error()}}
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	for slot := range cfg.Workers {
		w.startWorker(wctx, slot, 0)
	}
	for n := range cfg.Lambdas {
		w.wg.Go(func() { w.esm(wctx, n) })
	}
	if err := w.obStart(wctx); err != nil {
		stopWorkers()
		w.wg.Wait()
		return Result{Violations: []string{"set-up: outbox: " + err.Error()}}
	}
	produced := make(chan struct{})
	go func() { w.produce(ctx); close(produced) }()
	redriven := make(chan struct{})
	go func() { w.redriveDLQ1(ctx); close(redriven) }()
	operated := make(chan struct{}) // operators.go
	go func() { w.operate(ctx); close(operated) }()
	<-produced
	<-redriven
	<-operated
	// The fault phase ends when the queues settle; then the healed tail
	// (tail.go).
	if w.settle(ctx) {
		w.heal(ctx)
	}
	stopWorkers()
	w.wg.Wait()
	w.copies.polls.Wait()
	w.obCommitOrderAll(ctx)
	w.check(ctx)
	w.obCheck(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats["path: SQS duplicate delivery left (standard queue)"] += int(w.sqsDups.Load())
	for k, n := range w.inj.counts {
		w.stats["fault: "+k.String()] += n
	}
	var trace []string
	for _, s := range w.msgs {
		trace = append(trace, fmt.Sprintf("%d: %s", s.lid, strings.Join(w.trace[s.lid], " | ")))
	}
	w.logMu.Lock()
	logs := w.logs
	w.logMu.Unlock()
	res := Result{Violations: w.violations, Faults: w.inj.Injected(), Stats: w.stats, Virtual: time.Since(w.start), Trace: trace, Shape: w.shape.String(), Logs: logs}
	if w.seq != nil {
		w.seq.mu.Lock()
		res.Steps = w.seq.log
		w.seq.mu.Unlock()
	}
	res.Record, res.Diverged = w.seq.record()
	return res
}

// check verifies the end-of-run invariants, after the healed tail: every
// message that is not a dead end applied (once: the ledger's balances), and
// in no DLQ; every dead-end message in its DLQ, never applied; no claim left
// behind; each FIFO group's messages first applied in order.
func (w *world) check(ctx context.Context) {
	inDLQ := map[string]map[int]int{}
	for _, q := range []string{dlq1Name, dlq2Name} {
		inDLQ[q] = map[int]int{}
		for _, lid := range w.drain(ctx, q) {
			inDLQ[q][lid]++
		}
	}
	left := map[int]bool{}
	for _, q := range []string{q1Name, q2Name} {
		for _, lid := range w.drain(ctx, q) {
			left[lid] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	bad := func(format string, args ...any) {
		w.violations = append(w.violations, "end: "+fmt.Sprintf(format, args...))
	}
	sums := map[string][2]int64{} // account -> balance, applied
	for _, s := range w.msgs {
		dlq := dlqOf[s.queue]
		n := w.applied[s.lid]
		if n == 0 && w.obDropped(s.lid) {
			continue // an outbox message the operator dropped: never published
		}
		if s.deadEnd() {
			if n > 0 && !s.conflict {
				bad("poison message %d (%s) was applied", s.lid, s.key)
			}
			if inDLQ[dlq][s.lid] == 0 {
				why := ""
				switch {
				case w.redriven[s.lid]:
					why = " (its DLQ copy was redriven back to its queue and did not reach the DLQ again)"
				case w.dlqSent[s.lid]:
					why = " (a copy was sent to it: dropped by the DLQ's deduplication?)"
				}
				kind := "poison"
				if s.conflict {
					kind = "conflict"
				}
				bad("lost: %s message %d (%s, group %s, dedup id %s) is not in %s%s; its story: %s", kind, s.lid, s.queue, s.group, s.dedupID, dlq, why, strings.Join(w.trace[s.lid], " | "))
			}
			continue
		}
		switch {
		case n == 0:
			where := "nowhere"
			if inDLQ[dlq][s.lid] > 0 {
				where = "in " + dlq
				if !w.productCopyInDLQ(s.lid) {
					where += " (moved by the queue's redrive policy)"
				}
			}
			if left[s.lid] {
				where = "still in " + s.queue
			}
			bad("lost: message %d (%s, group %s, poison until fixed: %v) never applied after the tail's redrives; it is %s; its story: %s", s.lid, s.queue, s.group, s.fixable, where, strings.Join(w.trace[s.lid], " | "))
		case inDLQ[dlq][s.lid] > 0:
			bad("message %d (%s) applied but still in %s after the tail's redrives; its story: %s", s.lid, s.queue, dlq, strings.Join(w.trace[s.lid], " | "))
		}
		if s.queue == q1Name {
			acct := "acct#" + s.queue[:2] + "-" + s.group
			v := sums[acct]
			// Once, and once more per expired record met (ttl.go).
			v[0] += int64(s.lid) * int64(max(n, 1))
			v[1] += int64(max(n, 1))
			sums[acct] = v
		}
	}
	for _, q := range slices.Sorted(maps.Keys(inDLQ)) { // a replay reports in the same order
		for _, lid := range slices.Sorted(maps.Keys(inDLQ[q])) {
			// Found in a DLQ: dead-lettered, by the product or by the
			// queue's redrive policy, and so holding nothing back in its
			// group (the order check).
			w.markDLQ(lid)
			if w.byLid[lid] == nil {
				bad("%s holds message %d, which is no message of the workload", q, lid)
			}
		}
	}
	// Transactional mode: the ledger's balances are the sums sent once.
	for _, acct := range slices.Sorted(maps.Keys(sums)) {
		want := sums[acct]
		got, err := w.balance(ctx, acct)
		if err != nil {
			bad("read %s: %v", acct, err)
			continue
		}
		if got != want {
			bad("transactional balance: %s has balance %d from %d applications, want %d from %d (each message once)", acct, got[0], got[1], want[0], want[1])
		}
	}
	w.checkClaims(ctx, bad)
	w.checkRMW(ctx, sums, bad)
	w.checkLimits(ctx, bad)
	// Per-group order of first application follows sequence order. A
	// message that went to a DLQ holds nothing back (by design, as SQS's own
	// redrive policy): b may overtake a when a was in the DLQ and b was not
	// yet. Messages that both went through the DLQ before being applied are
	// redriven in the order they reached it.
	for _, k := range slices.Sorted(maps.Keys(w.order)) {
		lids := w.order[k]
		if w.std(k[:strings.IndexByte(k, '|')]) {
			continue // a standard queue keeps no order (standard.go)
		}
		pos := map[int]int{}
		for i, lid := range lids {
			pos[lid] = i
		}
		for _, a := range lids {
			for _, b := range lids {
				sa, sb := w.byLid[a], w.byLid[b]
				if sa.gseq >= sb.gseq || pos[a] < pos[b] {
					continue
				}
				// b (later in the group) was applied before a.
				ab := w.appliedAt[b]
				la, aLeft := w.dlqAt[a]
				lb := w.dlqAt[b]
				via := func(x int) bool { r, ok := w.redrivenAt[x]; return ok && r <= w.appliedAt[x] && w.appliedFromCopy(x) }
				aDead, bDead := via(a), via(b)
				ta, aVia := w.arrivedVia(a)
				tb, bVia := w.arrivedVia(b)
				switch {
				case w.inDLQAt(a, ab):
					continue // a was in a DLQ when b was applied (again, after a redrive of a)
				case bDead && w.failedAgainBefore(a, w.appliedVia[b]):
					continue // a failed again after its redrive, and was in a DLQ when b's copy was sent
				case aLeft && la <= ab && !bDead:
					continue // a was in the DLQ while b went on from the queue
				case aDead && bDead && lb < la:
					continue // both redriven; b reached the DLQ first
				case aVia && bVia && tb < ta, w.arrivedFirst(b, a):
					continue // both applied from redrive copies; b's DLQ message reached the DLQ first
				case w.obSQSHadFirst(b, a):
					continue // SQS had b first: a GroupBatch break, judged at SQS (groupbatch.go)
				}
				bad("order: in %s, message %d (seq %d) was first applied after message %d (seq %d); dead-lettered: %v; story of %d: %s; story of %d: %s",
					k, a, sa.gseq, b, sb.gseq, aDead && bDead, a, strings.Join(w.trace[a], " | "), b, strings.Join(w.trace[b], " | "))
			}
		}
	}
}

func num(v ddbtypes.AttributeValue) int64 {
	if n, ok := v.(*ddbtypes.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}

// balance reads a ledger item of the dedup table: its balance and how many
// applications made it (zero when it does not exist).
func (w *world) balance(ctx context.Context, pk string) ([2]int64, error) {
	out, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}})
	if err != nil || out.Item == nil {
		return [2]int64{}, err
	}
	return [2]int64{num(out.Item["balance_cents"]), num(out.Item["applied"])}, nil
}
