package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// The chain's healed tail, as the swarm's (tail.go). The fault phase runs
// until the chain settles (everything produced, the outbox and the source
// queues empty, twice in a row), or until settleCap; then no call gets a
// fault, paused processes wake and dead ones restart (chainThaw), and an
// operator redrives both DLQs with the product's redrive, in rounds, until
// they hold nothing but poison (the limit workload's deposits past a
// DynamoDB limit, limDeadLetters). Liveness (check: every deposit applied
// and confirmed once, in order; the outbox published; nothing pending; no
// claim left) is judged only after it; safety at every step: a dead letter
// of a message that is not poison is red when it is sent
// (judgeDeadLetter), in either phase. The chain's workload has no other
// dead end: a deposit or confirmation that fails for good is one applied
// out of its account's order (the ledgers' seq conditions refuse it).

// chainThaw: every pause injected before the tail has ended
// (Injector.delay: under twice the visibility timeout) and every dead
// process has restarted (5 to 25 s after its death).
const chainThaw = 2*visibility + 30*time.Second

// chainDLQs names each source queue's DLQ, in the order the tail redrives.
var chainDLQs = [][2]string{{chainDeposit, chainDLQ1}, {chainConfirm, chainDLQ2}}

// faultPhase waits until the chain has settled twice in a row, 30 s
// apart, or settleCap has passed: the length of the fault phase follows
// from the seed's faults.
func (c *chain) faultPhase(ctx context.Context) {
	for settled := 0; settled < 2 && time.Since(c.start) <= settleCap; {
		time.Sleep(30 * time.Second)
		if c.settled(ctx) {
			settled++
		} else {
			settled = 0
		}
	}
}

// heal runs the tail; it returns false (and says so) when the chain never
// settled.
func (c *chain) heal(ctx context.Context) bool {
	c.inj.healed.Store(true)
	c.mu.Lock()
	c.healedAt = time.Since(c.start)
	c.mu.Unlock()
	time.Sleep(chainThaw)
	if !c.tailSettle(ctx) {
		return false
	}
	for round := range tailRounds {
		live := c.liveInDLQ(ctx)
		if round > 0 && len(live) == 0 {
			return true
		}
		for _, qd := range c.dlqs() {
			if round == 0 || live[qd[1]] {
				c.tailRedrive(ctx, qd[1], qd[0], fmt.Sprintf("redrive.tail%d.%s", round, qd[1][:4]))
			}
		}
		c.stat("tail: redrive rounds", 1)
		if !c.tailSettle(ctx) {
			return false
		}
	}
	return true
}

// tailSettle waits until the chain has settled and nothing is in flight
// in a DLQ; past settleCap and a tail it reports that it never did.
func (c *chain) tailSettle(ctx context.Context) bool {
	limit := max(settleCap, c.healedAt+settleCap/2)
	for settled := 0; settled < 2; {
		if time.Since(c.start) > limit {
			c.violate("end: not settled after %s of virtual time (the tail from +%s): something is left in the outbox or the source queues", limit, c.healedAt.Round(time.Second))
			return false
		}
		time.Sleep(30 * time.Second)
		if c.settled(ctx) && c.dlqsIdle(ctx) {
			settled++
		} else {
			settled = 0
		}
	}
	return true
}

// dlqsIdle: nothing in flight in a DLQ (a redrive's receives hide it).
func (c *chain) dlqsIdle(ctx context.Context) bool {
	for _, qd := range c.dlqs() {
		a, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.urls[qd[1]]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil || a.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] != "0" {
			return false
		}
	}
	return true
}

// tailRedrive moves dlq's messages back to q with the product's redrive,
// until a run moves nothing.
func (c *chain) tailRedrive(ctx context.Context, dlq, q, name string) {
	before := time.Now()
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		p := &cproc{id: fmt.Sprintf("%s.%d", name, try), c: c}
		rctx, cancel := context.WithCancel(ctx)
		p.kill = cancel
		res, err := redrive.Run(rctx, &cSQS{p: p, inner: c.sqs}, redrive.Config{DLQ: c.urls[dlq], Queue: c.urls[q], Before: before})
		cancel()
		c.stat("tail: redrive moved", res.Moved)
		if err == nil && res.Moved == 0 {
			return
		}
		if err != nil {
			c.violate("tail: redrive %s: %v (no fault is injected in the tail)", dlq, err)
			return
		}
	}
}

// liveInDLQ lists, by a dry run of the product's redrive, the DLQs that
// hold a message that is not poison.
func (c *chain) liveInDLQ(ctx context.Context) map[string]bool {
	live := map[string]bool{}
	for _, qd := range c.dlqs() {
		p := &cproc{id: "operator.list." + qd[1][:4], c: c, kill: func() {}}
		res, err := redrive.Run(ctx, &cSQS{p: p, inner: c.sqs}, redrive.Config{DLQ: c.urls[qd[1]], Queue: c.urls[qd[0]], DryRun: true})
		if err != nil {
			live[qd[1]] = true // unknown: redrive it
			continue
		}
		for _, l := range res.Listed {
			if !c.poison(l.Body) {
				live[qd[1]] = true
			}
		}
	}
	return live
}

// poison: body is a deposit that must fail for good (past a DynamoDB
// limit: the limit workload's dead ones).
func (c *chain) poison(body string) bool {
	if !c.lim.on {
		return false
	}
	for k := range numLimKinds {
		if body == limDeposit(k) && (&limSpec{kind: k}).dead() {
			return true
		}
	}
	return false
}

// poisonKey: pk is the dedup record of a poison deposit (its group L<k>,
// its id dep-L<k>-1).
func (c *chain) poisonKey(pk string) bool {
	if !c.lim.on {
		return false
	}
	for k := range numLimKinds {
		if (&limSpec{kind: k}).dead() && strings.HasSuffix(pk, fmt.Sprintf("#L%d/dep-L%d-1", k, k)) {
			return true
		}
	}
	return false
}

// judgeDeadLetter judges a message sent to a DLQ of the chain, when the
// fakes took it: a deposit or confirmation that is not poison failed for
// good, which in the chain only an application out of its account's order
// does. Safety, at the step, in either phase: the tail's redrive would
// apply it after all, and the end would not see it.
func (c *chain) judgeDeadLetter(p *cproc, queueURL string, bodies ...string) {
	q := sqsmsg.QueueName(queueURL)
	if q != chainDLQ1 && q != chainDLQ2 && q != chainDLQ3 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at := time.Since(c.start).Round(time.Millisecond)
	for _, b := range bodies {
		if c.poison(b) {
			continue
		}
		if c.deadSeen[q+"|"+b] {
			continue // a retry of the same move
		}
		if c.deadSeen == nil {
			c.deadSeen = map[string]bool{}
		}
		c.deadSeen[q+"|"+b] = true
		phase := "the fault phase"
		if c.inj.healed.Load() {
			phase = "the tail, with no fault"
		}
		c.violations = append(c.violations, fmt.Sprintf("+%s: %s sent %s to %s in %s: a deposit or confirmation failed for good (out of order?)", at, p.id, b, q, phase))
	}
}

// checkClaims: after the tail no dedup record is still IN_PROGRESS but a
// poison deposit's: every claim was committed or released. (A poison
// deposit fails for good at its commit and goes to the DLQ; its claim
// stays until its lease ends, as the swarm's dead ends' do.)
func (c *chain) checkClaims(ctx context.Context) {
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := c.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(chainDedup), ExclusiveStartKey: start})
		if err != nil {
			c.violate("end: scan %s: %v", chainDedup, err)
			return
		}
		for _, it := range out.Items {
			if dedup.GetS(it, dedup.AttrStatus) == dedup.StatusInProgress && !c.poisonKey(dedup.GetS(it, "pk")) {
				c.violate("end: claim left behind: %s is still %s after the tail", dedup.GetS(it, "pk"), dedup.StatusInProgress)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return
		}
		start = out.LastEvaluatedKey
	}
}
