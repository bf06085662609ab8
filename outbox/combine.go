package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// Combining (docs/OUTBOX.md, "Concurrent Writes of one group"): the Writes
// of one Outbox whose messages are all of one (queue, group) queue on that
// group's line. One of them at a time, the driver, sends a transaction for
// a prefix of the line: each Write's own writes, then the head advanced
// once, then each Write's messages, in the line's order. Writes that arrive
// meanwhile wait and go together in the next. A Write touching several
// groups goes alone (writeAlone): no Write ever waits on two lines, so no
// two can wait on each other.

// line is one group's queue of combined Writes. Its fields are guarded by
// Outbox.mu.
type line struct {
	pk, queue, group string
	// waiting are the Writes not in a transaction under way, oldest first;
	// a Write retried after a transaction failed goes back to the front.
	waiting []*call
	// driver is the Write whose goroutine sends the line's transactions,
	// nil when none is under way (the line is then removed).
	driver *call
	// head is the group's head as the line's last transaction left it or
	// its last read found it; known false: read it first.
	head  groupHead
	known bool
}

// call is one combined Write.
type call struct {
	ctx    context.Context
	msgs   []Message
	writes []types.TransactWriteItem
	// solo: a combined transaction holding it was refused as invalid; it
	// goes alone, so that only its own transaction decides ErrInvalid.
	solo bool
	// moved counts its transactions that failed because the group's head
	// moved or a transaction conflicted (at most maxWriteAttempts).
	moved int
	// queued: on line.waiting. gone: its Write returned while it was in
	// a transaction under way (its context ended); its result is dropped.
	queued, gone bool
	wake         chan struct{} // its Write becomes the line's driver
	done         chan error    // its result
}

func (c *call) actions() int { return len(c.writes) + len(c.msgs) }

// oneGroup returns msgs' group when they are all of one (queue, group),
// nil otherwise; an error when one is invalid.
func oneGroup(msgs []Message) (*msgGroup, error) {
	groups, err := groupsOf(msgs)
	if err != nil || len(groups) != 1 {
		return nil, err
	}
	return groups[0], nil
}

// writeCombined is Write of g's messages on g's line.
func (o *Outbox) writeCombined(ctx context.Context, g *msgGroup, writes []types.TransactWriteItem) error {
	c := &call{ctx: ctx, msgs: g.msgs, writes: writes, wake: make(chan struct{}, 1), done: make(chan error, 1)}
	o.mu.Lock()
	l := o.lines[g.pk]
	if l == nil {
		l = &line{pk: g.pk, queue: g.queue, group: g.name}
		o.lines[g.pk] = l
	}
	l.waiting = append(l.waiting, c)
	c.queued = true
	if l.driver == nil {
		l.driver = c
		c.wake <- struct{}{}
	}
	o.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	case <-c.wake:
		return o.drive(l, c)
	case <-ctx.Done():
		return o.leave(l, c)
	}
}

// leave ends c's Write when its context ends before its result: a waiting
// Write leaves the line, nothing of it written; one in a transaction under
// way leaves it to commit or not (the outcome is unknown, as when a
// request's context ends).
func (o *Outbox) leave(l *line, c *call) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	default:
	}
	if c.queued {
		o.unqueue(l, c)
		return c.ctx.Err()
	}
	c.gone = true
	return fmt.Errorf("outbox: write: %w (the outcome is unknown: its transaction was under way)", c.ctx.Err())
}

// unqueue takes c off the line; if c was to drive, the next does. Under o.mu.
func (o *Outbox) unqueue(l *line, c *call) {
	for i, w := range l.waiting {
		if w == c {
			l.waiting = append(l.waiting[:i:i], l.waiting[i+1:]...)
			break
		}
	}
	c.queued = false
	if l.driver == c {
		o.handOver(l)
	}
}

// handOver makes the oldest waiting Write the line's driver, or removes
// the line when none waits. Under o.mu.
func (o *Outbox) handOver(l *line) {
	if len(l.waiting) > 0 {
		l.driver = l.waiting[0]
		l.driver.wake <- struct{}{}
		return
	}
	l.driver = nil
	delete(o.lines, l.pk)
}

// outcome is what one transaction did for one of its Writes.
type outcome struct {
	done bool  // err is the Write's result; else it goes back on the line
	err  error //
}

// drive sends the line's transactions, me's first in each (me is the
// line's oldest Write), until me has its result.
func (o *Outbox) drive(l *line, me *call) error {
	for {
		o.mu.Lock()
		if err := me.ctx.Err(); err != nil {
			o.unqueue(l, me)
			o.mu.Unlock()
			return err
		}
		batch := o.take(l)
		head, known := l.head, l.known
		o.mu.Unlock()

		outs, head, known, wait := o.attempt(l, batch, head, known)

		o.mu.Lock()
		l.head, l.known = head, known
		var back []*call
		for i, c := range batch {
			switch {
			case c.gone:
			case outs[i].done:
				c.done <- outs[i].err
			default:
				c.queued = true
				back = append(back, c)
			}
		}
		l.waiting = append(back, l.waiting...)
		if !me.queued {
			o.handOver(l)
			o.mu.Unlock()
			return <-me.done
		}
		o.mu.Unlock()
		if wait {
			_ = sleep(me.ctx, backoff(o.rand, me.moved)) // an ended context is seen above
		}
	}
}

// take takes the longest prefix of the line that can share a transaction:
// within DynamoDB's 100 actions, no Write that went alone, and no two
// writes naming the same item (a request DynamoDB refuses). Writes whose
// context has ended leave first, nothing of them written. Under o.mu; the
// line's first Write is the driver, whose context has not ended.
func (o *Outbox) take(l *line) []*call {
	live := l.waiting[:0]
	for _, c := range l.waiting {
		if c != l.driver && c.ctx.Err() != nil {
			c.queued = false
			c.done <- c.ctx.Err()
			continue
		}
		live = append(live, c)
	}
	clear(l.waiting[len(live):])
	l.waiting = live
	n, actions := 1, 1+l.waiting[0].actions()
	for ; n < len(l.waiting) && !l.waiting[0].solo; n++ {
		c := l.waiting[n]
		if c.solo || actions+c.actions() > ddblimit.TransactItems || sharesItem(c, l.waiting[:n]) {
			break
		}
		actions += c.actions()
	}
	batch := make([]*call, n)
	copy(batch, l.waiting)
	for _, c := range batch {
		c.queued = false
	}
	l.waiting = append(l.waiting[:0:0], l.waiting[n:]...)
	return batch
}

// attempt sends one transaction for batch (or for as long a prefix of it as
// DynamoDB's limits take) and returns each Write's outcome, the head as it
// leaves it, and whether the next transaction should back off (the group
// moved).
func (o *Outbox) attempt(l *line, batch []*call, head groupHead, known bool) (outs []outcome, _ groupHead, _ bool, wait bool) {
	outs = make([]outcome, len(batch))
	finish := func(cs []*call, err func(i int) error) {
		for i := range cs {
			outs[i] = outcome{done: true, err: err(i)}
		}
	}
	ctx := batch[0].ctx
	if len(batch) > 1 {
		var stop func()
		ctx, stop = whileAnyWaits(batch)
		defer stop()
	}
	if !known {
		h, err := o.readHead(ctx, l.pk)
		if err != nil {
			finish(batch, func(int) error { return err })
			return outs, head, false, false
		}
		head = h
	}
	now := o.now()
	items, at := o.combined(l, batch, head, now)
	for over, i, _ := ddblimit.Check(items); over != ddblimit.Within; over, i, _ = ddblimit.Check(items) {
		// The rest wait for the next transaction: from the Write whose
		// item is too large, else the last.
		n := len(batch) - 1
		if over == ddblimit.Item {
			n = at.owner[i]
		}
		if n == 0 {
			alone, _ := o.combined(l, batch[:1], head, now)
			outs[0] = outcome{done: true, err: checkSize(alone, len(batch[0].writes))}
			return outs, head, true, false
		}
		batch = batch[:n]
		items, at = o.combined(l, batch, head, now)
	}
	_, err := o.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		finish(batch, func(int) error { return nil })
		total := int64(0)
		for _, c := range batch {
			total += int64(len(c.msgs))
		}
		return outs, groupHead{seq: head.seq + total, exists: true}, true, false
	}
	if awserr.Code(err) == "ValidationException" {
		if len(batch) == 1 {
			finish(batch, func(int) error {
				return fmt.Errorf("%w: DynamoDB refused the transaction: %w", ErrInvalid, err)
			})
			return outs, head, true, false
		}
		// Two of them may name one item: each goes alone.
		for _, c := range batch {
			c.solo = true
		}
		return outs, head, true, false
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != len(items) {
		if len(batch) == 1 && (Batch{Items: items[len(batch[0].writes):]}).Retry(err, len(batch[0].writes)) {
			return o.moved(batch, outs, err), head, false, true
		}
		finish(batch, func(int) error { return fmt.Errorf("outbox: write: %w", err) })
		return outs, head, false, false
	}
	// Cancelled, nothing written: whose reason was it?
	reasons := tce.CancellationReasons
	code := func(i int) string { return aws.ToString(reasons[i].Code) }
	moved, other, failed := false, false, false
	for i := at.head; i < len(items); i++ {
		switch code(i) {
		case "", "None":
		case "TransactionConflict", "ConditionalCheckFailed":
			moved = true // the head moved, or a message's place was taken
		default:
			other = true
		}
	}
	own := func(i int) error {
		return fmt.Errorf("outbox: write: %w", at.cancellation(tce, i, len(batch) == 1, err))
	}
	for i := range batch {
		for j := at.writes[i]; j < at.writes[i]+len(batch[i].writes); j++ {
			switch code(j) {
			case "", "None":
			case "TransactionConflict":
				moved = true
			default: // its own condition, or another refusal of its write
				outs[i] = outcome{done: true, err: own(i)}
				failed = true
			}
		}
	}
	if other || !moved && !failed {
		for i := range batch {
			if !outs[i].done {
				outs[i] = outcome{done: true, err: own(i)}
			}
		}
		return outs, head, false, false
	}
	if !moved { // only some of them failed: the others go again at once
		return outs, head, true, false
	}
	return o.moved(batch, outs, err), head, false, true
}

// moved counts a moved head against each Write of batch still without a
// result, and ends those that have met it maxWriteAttempts times.
func (o *Outbox) moved(batch []*call, outs []outcome, err error) []outcome {
	for i, c := range batch {
		if outs[i].done {
			continue
		}
		if c.moved++; c.moved >= maxWriteAttempts {
			outs[i] = outcome{done: true, err: fmt.Errorf("outbox: write: %d attempts, the groups kept moving: %w", maxWriteAttempts, err)}
		}
	}
	return outs
}

// layout is where each Write's items are in a combined transaction.
type layout struct {
	writes []int // the index of each Write's first write
	head   int   // the head's update
	puts   []int // the index of each Write's first message
	n      []int // each Write's message count
	owner  []int // each item's Write (-1: the head)
}

// combined returns the transaction of batch on l's group from head: every
// Write's own writes in order, the head's update, every Write's messages
// in order.
func (o *Outbox) combined(l *line, batch []*call, head groupHead, now time.Time) ([]types.TransactWriteItem, layout) {
	at := layout{writes: make([]int, len(batch)), puts: make([]int, len(batch)), n: make([]int, len(batch))}
	var items []types.TransactWriteItem
	total := int64(0)
	for i, c := range batch {
		at.writes[i] = len(items)
		items = append(items, c.writes...)
		total += int64(len(c.msgs))
		for range c.writes {
			at.owner = append(at.owner, i)
		}
	}
	at.head = len(items)
	items = append(items, o.headUpdate(l.pk, l.queue, l.group, head, total, now))
	at.owner = append(at.owner, -1)
	seq := head.seq
	for i, c := range batch {
		at.puts[i], at.n[i] = len(items), len(c.msgs)
		items = o.appendPuts(items, l.pk, l.group, seq, c.msgs, now)
		seq += int64(len(c.msgs))
		for range c.msgs {
			at.owner = append(at.owner, i)
		}
	}
	return items, at
}

// cancellation is the cancellation Write i of a combined transaction
// reports: the reasons of its own items, in the order its own transaction
// would have held them (its writes, the head, its messages), as if it had
// gone alone. Alone, it is DynamoDB's error as it came.
func (at layout) cancellation(tce *types.TransactionCanceledException, i int, alone bool, err error) error {
	if alone {
		return err
	}
	end := at.head
	if i+1 < len(at.writes) {
		end = at.writes[i+1]
	}
	var reasons []types.CancellationReason
	reasons = append(reasons, tce.CancellationReasons[at.writes[i]:end]...)
	reasons = append(reasons, tce.CancellationReasons[at.head])
	reasons = append(reasons, tce.CancellationReasons[at.puts[i]:at.puts[i]+at.n[i]]...)
	codes := make([]string, len(reasons))
	for k, r := range reasons {
		codes[k] = aws.ToString(r.Code)
	}
	return &types.TransactionCanceledException{
		Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
		CancellationReasons: reasons,
	}
}

// whileAnyWaits is a context for a transaction of batch: it ends when all
// of their contexts have ended, not when the first does, so that a Write
// leaving does not fail the others' transaction.
func whileAnyWaits(batch []*call) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, c := range batch {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// sharesItem reports whether one of c's writes names an item one of
// batch's writes names, as far as Write can tell without the tables' key
// schemas: the same key of an update, delete or condition check, or such a
// key held by a put's item. Two puts of one item are not seen; DynamoDB
// refuses their transaction, and each Write goes alone.
func sharesItem(c *call, batch []*call) bool {
	for _, w := range c.writes {
		for _, b := range batch {
			for _, x := range b.writes {
				if sameItem(w, x) {
					return true
				}
			}
		}
	}
	return false
}

func sameItem(a, b types.TransactWriteItem) bool {
	ta, ka, pa := target(a)
	tb, kb, pb := target(b)
	switch {
	case ta != tb || ka == nil || kb == nil || pa && pb:
		return false
	case pa:
		return holds(ka, kb)
	case pb:
		return holds(kb, ka)
	}
	return len(ka) == len(kb) && holds(ka, kb)
}

// target is a write's table and its key, or a put's item (put true).
func target(w types.TransactWriteItem) (table string, key map[string]types.AttributeValue, put bool) {
	switch {
	case w.Put != nil:
		return aws.ToString(w.Put.TableName), w.Put.Item, true
	case w.Update != nil:
		return aws.ToString(w.Update.TableName), w.Update.Key, false
	case w.Delete != nil:
		return aws.ToString(w.Delete.TableName), w.Delete.Key, false
	case w.ConditionCheck != nil:
		return aws.ToString(w.ConditionCheck.TableName), w.ConditionCheck.Key, false
	}
	return "", nil, false
}

// holds reports whether item has every attribute of key, equal.
func holds(item, key map[string]types.AttributeValue) bool {
	for k, v := range key {
		if !sameKeyValue(item[k], v) {
			return false
		}
	}
	return true
}

// sameKeyValue compares key values (strings, numbers as written, binaries).
func sameKeyValue(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(x.Value, y.Value)
	}
	return false
}
