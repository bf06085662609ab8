package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/outbox"
)

// The combining workload (issue 22): in one chain seed in chainCmbEvery, a
// process runs chainCmbWriters goroutines that share one outbox.Outbox and
// write one or two groups of a queue of their own (no consumer: check
// reads it) at once, so that Write combines their Writes into shared
// transactions, under the chain's faults. Each writer's Writes go one after
// another, each of one to three messages with a business item (once: its
// condition tells a retry it committed); some carry a condition check that
// always fails, and some update an item every writer of the group updates
// (two writes of one item: never in one transaction). Judged at the end,
// from the queue's first copies:
//   - every Write that did not fail reached the queue once, its messages
//     consecutive and in order, and each writer's Writes of a group in the
//     order it made them (the order of commit);
//   - nothing of a Write whose condition failed (its business item, its
//     messages), and that Write was told so: a cancellation whose first
//     reason, its own check's, is ConditionalCheckFailed;
//   - no Write refused as invalid.
const (
	chainCmbQueue   = "combine.fifo"
	chainCmbEvery   = 3
	chainCmbWriters = 4
	chainCmbWrites  = 5 // per writer
	chainCmbHold    = 5 * time.Millisecond
)

type chainCmb struct {
	on      bool
	groups  int
	written atomic.Bool
	mu      sync.Mutex
	refused map[string]bool // the failing Writes that were told so
}

func newChainCmb(seed uint64) *chainCmb {
	x := hash64(seed, "chain combine")
	return &chainCmb{on: x%chainCmbEvery == 0, groups: 1 + int(x>>8)%2, refused: map[string]bool{}}
}

// cmbWrite is writer w's Write i: its group, its messages' count, whether
// its condition fails, whether it updates the group's shared item.
type cmbWrite struct {
	w, i          int
	group         string
	msgs          int
	fails, shared bool
}

func (c *chain) cmbPlan(w, i int) cmbWrite {
	x := hash64(c.cfg.Seed, "chain combine write", fmt.Sprint(w, "-", i))
	return cmbWrite{w: w, i: i, group: fmt.Sprint("c", (w+i)%c.cmb.groups), msgs: 1 + int(x%3), fails: (x>>4)%5 == 0, shared: (x>>8)%4 == 0}
}

func (cw cmbWrite) id() string               { return fmt.Sprintf("cmb-w%d-%d", cw.w, cw.i) }
func (cw cmbWrite) body(k int) string        { return fmt.Sprintf("w%d-%d-%d", cw.w, cw.i, k) }
func (cw cmbWrite) msgID(k int) string       { return fmt.Sprintf("%s-%d", cw.id(), k) }
func (c *chain) cmbDone() bool               { return !c.cmb.on || c.cmb.written.Load() }
func (c *chain) cmbQueues() []string         { return map[bool][]string{true: {chainCmbQueue}}[c.cmb.on] }
func (c *chain) cmbLoop(ctx context.Context) { c.loop(ctx, "combiner", c.combine) }

// combine runs the writers of one incarnation; each starts from its first
// Write again (the process knows nothing of the last one's).
func (c *chain) combine(ctx context.Context, p *cproc) {
	ob := outbox.New(&holdDB{cDynamo: &cDynamo{p: p, inner: c.db}, hold: chainCmbHold, writePrefix: "cmb-w", several: "combine: transactions of several Writes"}, chainOutbox, outbox.WithRand(seededRand(c.cfg.Seed, p.id)))
	var wg sync.WaitGroup
	for w := range chainCmbWriters {
		wg.Go(func() {
			for i := range chainCmbWrites {
				// Apart by a few µs drawn from the seed: the order in
				// which they queue is the seed's.
				time.Sleep(time.Duration(1+hash64(c.cfg.Seed, p.id, fmt.Sprint(w, "-", i))%50) * time.Microsecond)
				// Two drawn alike, or woken together by the Write they
				// shared, would queue in the runtime's order: a step
				// orders them by the seed (sequencer.go).
				cw := c.cmbPlan(w, i)
				c.seq.step(p.id, "outbox.Write", cw.id())
				if !c.cmbWrite(ctx, p, ob, cw) {
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil && !p.dead.Load() {
		c.cmb.written.Store(true)
		<-ctx.Done()
	}
}

// cmbWrite makes one Write until it is known committed, or refused for its
// condition; false when the process died.
func (c *chain) cmbWrite(ctx context.Context, p *cproc, ob *outbox.Outbox, cw cmbWrite) bool {
	var writes []ddbtypes.TransactWriteItem
	if cw.fails {
		writes = append(writes, ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String(chainBusiness),
			Key: cmbKey("cmb-never"), ConditionExpression: aws.String("attribute_exists(pk)")}})
	}
	writes = append(writes, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(chainBusiness),
		Item: cmbKey(cw.id()), ConditionExpression: aws.String("attribute_not_exists(pk)")}})
	if cw.shared {
		writes = append(writes, ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(chainBusiness),
			Key: cmbKey("cmb-shared-" + cw.group), UpdateExpression: aws.String("ADD #n :one"),
			ExpressionAttributeNames: map[string]string{"#n": "n"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}})
	}
	var msgs []outbox.Message
	for k := range cw.msgs {
		msgs = append(msgs, outbox.Message{QueueURL: c.urls[chainCmbQueue], Group: cw.group, Body: cw.body(k), ID: cw.msgID(k)})
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || p.dead.Load() {
			return false
		}
		err := ob.Write(ctx, msgs, writes...)
		var tce *ddbtypes.TransactionCanceledException
		switch {
		case err == nil && cw.fails:
			c.violate("combine: %s committed although its condition fails", cw.id())
			return true
		case err == nil:
			c.stat("combine: writes committed", 1)
			return true
		case errors.Is(err, outbox.ErrInvalid):
			c.violate("combine: %s refused as invalid: %v", cw.id(), err)
			return true
		case errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed":
			if cw.fails {
				c.stat("combine: writes refused for their condition", 1)
				c.cmb.mu.Lock()
				c.cmb.refused[cw.id()] = true
				c.cmb.mu.Unlock()
			}
			return true // its condition, or its business item committed by an earlier attempt
		case errors.As(err, &tce) && cw.fails:
			c.violate("combine: %s cancelled, but not for its own condition: %v", cw.id(), err)
			return true
		}
		c.stat("combine: writes retried", 1)
		time.Sleep(time.Second << min(attempt, 4))
	}
}

func cmbKey(pk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
}

// checkCombined judges the combining workload from its queue.
func (c *chain) checkCombined(ctx context.Context) {
	if !c.cmb.on {
		return
	}
	got := byGroup(c.drainQueue(ctx, chainCmbQueue))
	for w := range chainCmbWriters {
		for i := range chainCmbWrites {
			cw := c.cmbPlan(w, i)
			bodies := got[cw.group]
			at := -1
			for j, b := range bodies {
				if b == cw.body(0) {
					at = j
					break
				}
			}
			stored := c.get(ctx, chainBusiness, cw.id()) != nil
			if cw.fails {
				if at >= 0 || stored {
					c.violate("combine: %s failed its condition, yet its messages (%v) or business item (%v) were written", cw.id(), at >= 0, stored)
				}
				c.cmb.mu.Lock()
				told := c.cmb.refused[cw.id()]
				c.cmb.mu.Unlock()
				if !told {
					c.violate("combine: %s was never told its condition failed", cw.id())
				}
				continue
			}
			if at < 0 || !stored {
				c.violate("combine: %s committed, yet its messages (%v) or business item (%v) are missing", cw.id(), at >= 0, stored)
				continue
			}
			for k := range cw.msgs {
				if at+k >= len(bodies) || bodies[at+k] != cw.body(k) {
					c.violate("combine: group %s: %s's messages are not consecutive and in order: %v", cw.group, cw.id(), bodies)
					break
				}
			}
		}
	}
	for group, bodies := range got {
		last := map[string]int{}
		for _, b := range bodies {
			var w, i, k int
			if _, err := fmt.Sscanf(b, "w%d-%d-%d", &w, &i, &k); err != nil {
				c.violate("combine: group %s: message %q", group, b)
				continue
			}
			writer := fmt.Sprint("w", w)
			if prev, ok := last[writer]; ok && (i < prev || i == prev && k == 0) {
				c.violate("combine: group %s: writer %s's Writes out of the order it made them: %v", group, writer, bodies)
			}
			last[writer] = i
		}
	}
}
