package sim

import (
	"context"
	"github.com/exactlyonce/exactly/internal/redrive"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// copies is what the order check needs to know of a message's deliveries:
// which SQS messages are redrive copies of it, and who received and deleted
// each (appliedFromCopy). It also keeps the long polls SQS serves after
// their callers gave up (receive), which the run waits for.
type copies struct {
	polls sync.WaitGroup // long polls given up by their callers, until their wait ends
	mu    sync.Mutex
	recvs map[string][]delivery // SQS message id -> its receives from its source queue
	ids   map[int][]string      // logical id -> the SQS ids of its redrive copies
	dels  map[int][]delivery    // logical id -> deletes of its SQS messages
	// arrived: DLQ message id -> when it reached its DLQ; from: redrive
	// copy id -> the DLQ message it copies (its dedup id names it).
	arrived map[string]time.Duration
	from    map[string]string
	// seen: DLQ message id -> its place in the order the world first saw
	// DLQ messages (a FIFO DLQ hands a group's out in order): what breaks
	// a tie of arrived, when two were moved at one instant.
	seen map[string]int
}

// delivery is a receive or a delete of an SQS message by a process.
type delivery struct {
	at   time.Duration
	proc string
	id   string // a delete's SQS message id
}

func newCopies() *copies {
	return &copies{recvs: map[string][]delivery{}, ids: map[int][]string{}, dels: map[int][]delivery{}, arrived: map[string]time.Duration{}, from: map[string]string{}, seen: map[string]int{}}
}

// noteRecv records p's receives of ms from a source queue, made at +at
// (nil p: the event source mapping's, which the esm records once it knows
// the container).
func (w *world) noteRecv(p *proc, at time.Duration, ms []types.Message) {
	if p == nil {
		return
	}
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, m := range ms {
		id := aws.ToString(m.MessageId)
		x.recvs[id] = append(x.recvs[id], delivery{at: at, proc: p.id})
	}
}

// noteDelete records p's delete of lid's SQS message id. w.mu held.
func (w *world) noteDelete(p *proc, lid int, id string) {
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dels[lid] = append(x.dels[lid], delivery{at: time.Since(w.start), proc: p.id, id: id})
}

// noteCopy records a redrive copy of lid sent back to its queue, with the
// dedup id the redrive gave it. w.mu held.
func (w *world) noteCopy(lid int, id, dedupID string) {
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	x.ids[lid] = append(x.ids[lid], id)
	if src, ok := redrive.CopiedFrom(dedupID); ok {
		x.from[id] = src
	}
}

// noteArrived records that DLQ message id reached its DLQ at +at (the first
// time it is seen).
func (w *world) noteArrived(id string, at time.Duration) {
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.arrived[id]; !ok {
		x.arrived[id] = at
		x.seen[id] = len(x.seen) + 1
	}
}

// arrivedVia: when the DLQ message whose redrive copy first applied lid
// reached the DLQ (false when lid was not applied from a redrive copy, or
// that is not known). A DLQ is FIFO too: its messages are redriven in the
// order they reached it. w.mu held.
func (w *world) arrivedVia(lid int) (time.Duration, bool) {
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	src, ok := x.from[w.appliedVia[lid]]
	if !ok {
		return 0, false
	}
	at, ok := x.arrived[src]
	return at, ok
}

// arrivedFirst reports whether b and a were both first applied from
// redrive copies and b's DLQ message reached the DLQ before a's: earlier,
// or at the same instant and seen first. w.mu held.
func (w *world) arrivedFirst(b, a int) bool {
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	sb, okb := x.from[w.appliedVia[b]]
	sa, oka := x.from[w.appliedVia[a]]
	if !okb || !oka {
		return false
	}
	tb, okb := x.arrived[sb]
	ta, oka := x.arrived[sa]
	if !okb || !oka {
		return false
	}
	return tb < ta || tb == ta && x.seen[sb] < x.seen[sa]
}

// appliedFromCopy reports whether lid's first application was made for one
// of its redrive copies, and not by a process still holding an earlier
// delivery (a frozen worker that commits after the message was moved and
// redriven). w.mu held.
func (w *world) appliedFromCopy(lid int) bool {
	if len(w.callers[lid]) == 0 {
		return false
	}
	who, at := w.callers[lid][0], w.appliedAt[lid]
	x := w.copies
	x.mu.Lock()
	defer x.mu.Unlock()
	// The delivery the applying effect ran for, as the effect saw it: a
	// process may hold a resent duplicate and a redrive copy of the same
	// message in one lane.
	if via := w.appliedVia[lid]; via != "" {
		return slices.Contains(x.ids[lid], via)
	}
	// The delete that follows the commit names the delivery it came from.
	for _, d := range x.dels[lid] {
		if d.proc == who && d.at >= at {
			return slices.Contains(x.ids[lid], d.id)
		}
	}
	for _, id := range x.ids[lid] {
		for _, r := range x.recvs[id] {
			if r.proc == who && r.at <= at {
				return true
			}
		}
	}
	return false
}

// receive is the fake's ReceiveMessage with a context the caller's end does
// not cancel: SQS (and memsqs) serve a long poll its caller gave up on, and
// what that poll takes is in flight for nobody until its visibility timeout.
// The poll ends within its wait time (run waits for it).
func (c *faultySQS) receive(ctx context.Context, q string, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	type answer struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	w := c.p.w
	var mu sync.Mutex
	gaveUp := false
	done := make(chan answer, 1)
	w.copies.polls.Go(func() {
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

// orphaned notes in their stories what p's given-up long poll took.
func (w *world) orphaned(p *proc, q string, ms []types.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range ms {
		lid := lidNum(aws.ToString(m.Body))
		w.tr(lid, "the given-up long poll of %s (dead: %v) took %s from %s (receive count %s)", p.id, p.dead.Load(), aws.ToString(m.MessageId), q, m.Attributes["ApproximateReceiveCount"])
	}
}
