package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/redrive"
)

// The healed tail. A run has two phases: the fault phase, from the start
// until the workload is sent, the mid-run redrive is done and the queues
// have settled (its length follows from the seed's world and faults), and
// the tail. In the tail no call gets a fault; frozen processes thaw and
// crashed ones restart on their own (within tailThaw); then an operator
// redrives every DLQ with the product's redrive until nothing but dead-end
// messages (poison, conflicts, invalid commits, over-limit commits) is left
// there. Safety is judged at every step of both phases; liveness only at
// the end, after the tail (check): every other message applied, every
// dead-end one in its DLQ. In the tail itself SQS's redrive policy moves
// nothing (worldMoved) and no claim is left behind (checkClaims): with
// nothing failing, a receive the product wastes shows as a move there.

// tailThaw: every freeze and pause injected before the tail has ended
// (Injector.delay: at most twice the longest visibility timeout), and every
// crashed process has restarted (5 to 25 s after its death).
func (w *world) tailThaw() time.Duration { return 2*w.shape.maxVis() + 30*time.Second }

// tailRounds bounds the operator's redrives of the tail: each round gives
// every message in a DLQ one more fault-free chance; a message that fails
// again for no reason of its own comes back, and the end check names it.
const tailRounds = 4

// settle waits until the source queues and the outbox are empty and
// nothing is in flight in the DLQs, or reports that they never were.
func (w *world) settle(ctx context.Context) bool {
	for !w.settled(ctx) || !w.obSettled(ctx) {
		if time.Since(w.start) > settleCap {
			w.violate("not settled after %s of virtual time: messages left in the source queues", settleCap)
			return false
		}
		time.Sleep(30 * time.Second)
	}
	return true
}

// heal runs the tail.
func (w *world) heal(ctx context.Context) {
	w.inj.healed.Store(true)
	w.mu.Lock()
	w.healedAt = time.Since(w.start)
	w.mu.Unlock()
	time.Sleep(w.tailThaw())
	if !w.settle(ctx) {
		return
	}
	w.mu.Lock()
	w.redriveFrom = time.Since(w.start)
	w.mu.Unlock()
	for round := range tailRounds {
		live := w.liveInDLQ(ctx)
		if round > 0 && len(live) == 0 {
			return
		}
		for _, q := range []string{q1Name, q2Name} {
			dlq := dlqOf[q]
			if round == 0 || live[dlq] {
				w.redrive(ctx, dlq, q, fmt.Sprintf("redrive.tail%d.%s", round, dlq[:4]))
			}
		}
		w.stat("tail: redrive rounds", 1)
		if !w.settle(ctx) {
			return
		}
	}
}

// dlqOf names each source queue's DLQ.
var dlqOf = map[string]string{q1Name: dlq1Name, q2Name: dlq2Name}

// liveInDLQ lists, by a dry run of the product's redrive, the DLQs that
// hold a message that is not a dead end.
func (w *world) liveInDLQ(ctx context.Context) map[string]bool {
	live := map[string]bool{}
	for _, q := range []string{q1Name, q2Name} {
		dlq := dlqOf[q]
		p := w.newProc("operator.list." + dlq[:4])
		res, err := redrive.Run(ctx, &faultySQS{p: p, inner: w.sqs}, redrive.Config{DLQ: w.urls[dlq], Queue: w.urls[q], DryRun: true})
		if err != nil {
			live[dlq] = true // unknown: redrive it
			continue
		}
		for _, l := range res.Listed {
			if s := w.byLid[lidNum(l.Body)]; s == nil || !s.deadEnd() {
				live[dlq] = true
			}
		}
	}
	return live
}

// judgeTailMove: a move by SQS's redrive policy of a message received after
// the tail's redrives began is a receive the product wasted, with no fault
// to blame. w.mu held.
func (w *world) judgeTailMove(lid int, lastRecv time.Duration) {
	if w.redriveFrom == 0 || lastRecv < w.redriveFrom {
		return
	}
	w.violations = append(w.violations, fmt.Sprintf("tail: SQS's redrive policy moved message %d after the faults healed (last received +%s, the tail's redrives from +%s): its receives were wasted with no fault; its story: %s",
		lid, lastRecv.Round(time.Millisecond), w.redriveFrom.Round(time.Millisecond), strings.Join(w.trace[lid], " | ")))
}

// checkClaims: after the tail, no record is still IN_PROGRESS for a
// delivery of a message that is not a dead end: every such claim was
// committed or released. (A dead-end message's claim stays until its lease
// ends: its permanent failure moves it to the DLQ and leaves the record;
// and a conflict message claims its key's record once that has expired.)
// w.mu held.
func (w *world) checkClaims(ctx context.Context, bad func(string, ...any)) {
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start})
		if err != nil {
			bad("scan %s: %v", table, err)
			return
		}
		for _, it := range out.Items {
			if dedup.GetS(it, dedup.AttrStatus) != dedup.StatusInProgress {
				continue
			}
			lid, ok := w.msgLid[dedup.GetS(it, dedup.AttrMessageID)]
			if s := w.byLid[lid]; ok && s != nil && !s.deadEnd() {
				bad("claim left behind: %s (message %d, %s) is still %s after the tail; its story: %s", dedup.GetS(it, "pk"), s.lid, s.queue, dedup.StatusInProgress, strings.Join(w.trace[s.lid], " | "))
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return
		}
		start = out.LastEvaluatedKey
	}
}
