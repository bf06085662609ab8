package process

import (
	"context"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// GroupCommitter gathers the first attempts of optimistic commits made
// within Window of each other into one TransactWriteItems (at most
// dedup.MaxGroupItems items and dedup.MaxGroupBytes), so that messages handled at once cost one
// request. No goroutine of its own: the first commit of a group waits for
// company and makes the request for all of it; the others wait for its
// answer. A commit that writes an item the open group already writes goes
// alone (DynamoDB refuses two operations on one item in a transaction). A
// commit that the group's transaction gives no verdict on (another's
// condition failed, no answer) is retried alone at once by the caller.
//
// The window is the upper bound of the wait: the group goes as soon as no
// message under way (between begin and end, see groupTicket) is still
// outside a commit, since nothing else could join it. So a commit never
// waits for company that cannot come (one message alone goes at once, and
// a group of every handler's message goes when the last one joins); only
// a straggler (an effect still running) is waited for, up to the window.
//
// A message whose caller takes its slot back while it commits (Hooks.Yield)
// is pipelined: its caller starts another message's effect meanwhile. A
// group waits only for the pipelined messages whose effects began before it
// opened: one started after it is company that may come, not company it
// waits for, so a group waits at most about one effect's time even while
// new effects keep starting. A pipelined message whose commit has its
// answer is not waited for either: its caller needs a slot again before
// its next message, and the slot it gave back went to another message.
// Safe for concurrent use.
type GroupCommitter struct {
	Store  *dedup.Store
	Window time.Duration

	mu      sync.Mutex
	open    *commitGroup
	outside int // messages under way that may still commit: see groupTicket
	// late is how many of outside are pipelined messages that began while
	// the open group was open: it does not wait for them.
	late int
	gen  uint64 // groups opened so far: the open group's number
}

// commitGroup is one transaction's worth of commits.
type commitGroup struct {
	entries []dedup.GroupEntry
	tickets []*groupTicket
	ids     map[string]bool // the items its commits write
	items   int
	bytes   int
	full    chan struct{} // closed when no more fit, or no more can come: commit now
	done    chan struct{} // closed when out is set
	out     []dedup.GroupResult
	gen     uint64 // its number among the groups opened
}

// A groupTicket follows one message under way through a GroupCommitter,
// from begin (its effect starts) to end (its processing returns):
//   - outside: it may still commit (its effect runs, or its commit is being
//     prepared);
//   - inside: its commit is in a group, or going alone;
//   - returned: its commit has its answer and its processing is returning;
//     its handler usually takes the next message at once, so a group opened
//     meanwhile waits for it (up to the window) instead of going without;
//   - done: it went another way (skip): it will not commit here.
//
// Messages outside or returned count in g.outside; the open group goes
// when that count, less g.late, is 0. A pipelined ticket (one with a yield)
// never returns: its commit's answer makes it done.
type groupTicket struct {
	g     *GroupCommitter
	state int
	// yield is Hooks.Yield, called when the commit goes inside (then nil);
	// pipelined says there was one.
	yield     func()
	pipelined bool
	gen       uint64 // g.gen when it began
	late      bool   // counted in g.late: began while group gen was open
}

const (
	ticketOutside = iota
	ticketInside
	ticketReturned
	ticketDone
)

// begin counts a message under way whose commit may join a group; yield,
// when not nil, is called when its commit goes inside (see Hooks.Yield).
func (g *GroupCommitter) begin(yield func()) *groupTicket {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.outside++
	t := &groupTicket{g: g, yield: yield, pipelined: yield != nil, gen: g.gen}
	if t.pipelined && g.open != nil {
		t.late = true
		g.late++
	}
	return t
}

// skip: t's message will not commit through the group (its effect failed,
// its commit goes another way). A nil t is a no-op.
func (t *groupTicket) skip() {
	if t == nil {
		return
	}
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	if t.state == ticketOutside {
		t.leave(ticketDone)
	}
}

// end: t's message is done. One that never committed here leaves as skip
// does; one whose commit returned leaves without closing the open group,
// which it is likely to join again with its handler's next message (the
// window bounds the wait if it does not). A nil t is a no-op.
func (t *groupTicket) end() {
	if t == nil {
		return
	}
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	switch t.state {
	case ticketOutside:
		t.leave(ticketDone)
	case ticketReturned:
		t.g.outside--
		t.state = ticketDone
	}
}

// leave moves t from outside to state and sends the open group if nobody
// is left outside. g.mu held.
func (t *groupTicket) leave(state int) {
	g := t.g
	g.outside--
	if t.late && g.open != nil && g.open.gen == t.gen {
		g.late--
	}
	t.late = false
	t.state = state
	if g.outside == g.late && g.open != nil {
		g.flush(g.open)
	}
}

// back: t's commit has its answer. g.mu held.
func (t *groupTicket) back() {
	if t == nil || t.state != ticketInside {
		return
	}
	if t.pipelined {
		t.state = ticketDone
		return
	}
	t.g.outside++
	t.state = ticketReturned
}

// takeYield returns t's yield once its commit has gone inside (then nil),
// for the caller to call once g.mu is released. g.mu held.
func (t *groupTicket) takeYield() func() {
	if t == nil || t.state != ticketInside {
		return nil
	}
	y := t.yield
	t.yield = nil
	return y
}

// call calls y unless it is nil.
func call(y func()) {
	if y != nil {
		y()
	}
}

// Commit commits e with whatever other commits arrive within the window,
// and returns e's outcome as Store.CommitOptimistic would, or an error
// wrapping dedup.ErrNotAlone. A commit made through Commit is not counted
// under way: its group goes when the window ends, or when it fills, or when
// the messages the Processor counts have all joined.
func (g *GroupCommitter) Commit(ctx context.Context, e dedup.GroupEntry) (dedup.Claim, error) {
	return g.commit(ctx, nil, e)
}

// commit is Commit for the message t follows (from begin; nil: not counted).
func (g *GroupCommitter) commit(ctx context.Context, t *groupTicket, e dedup.GroupEntry) (dedup.Claim, error) {
	n, size, err := g.Store.Size(e)
	if err != nil {
		// It fails on its own (too large for any transaction, say): not
		// in a group, whose others it would only hold up.
		return g.alone(ctx, t, e)
	}
	ids := g.Store.ItemIDs(e)
	g.mu.Lock()
	c := g.open
	if c != nil && c.overlaps(ids) {
		g.mu.Unlock()
		return g.alone(ctx, t, e)
	}
	if c != nil && (c.items+n > dedup.MaxGroupItems || c.bytes+size > dedup.MaxGroupBytes) {
		g.flush(c) // its commits go now; this one opens the next group
		c = nil
	}
	leader := c == nil
	if leader {
		// Every message outside now began before c: c waits for them all.
		g.gen++
		g.late = 0
		c = &commitGroup{ids: map[string]bool{}, full: make(chan struct{}), done: make(chan struct{}), gen: g.gen}
		g.open = c
	}
	i := len(c.entries)
	c.entries = append(c.entries, e)
	c.tickets = append(c.tickets, t)
	c.items += n
	c.bytes += size
	for _, id := range ids {
		c.ids[id] = true
	}
	if c.items >= dedup.MaxGroupItems {
		g.flush(c)
	}
	if t != nil && t.state == ticketOutside {
		t.leave(ticketInside) // the last one outside sends c
	}
	yield := t.takeYield()
	g.mu.Unlock()
	call(yield)

	if leader {
		tm := time.NewTimer(g.Window)
		select {
		case <-tm.C:
		case <-c.full:
		}
		tm.Stop()
		g.mu.Lock()
		if g.open == c {
			g.open = nil
		}
		g.mu.Unlock()
		// Nothing is added to c from here on.
		out := g.Store.CommitGroup(ctx, c.entries)
		g.mu.Lock()
		for _, t := range c.tickets {
			t.back() // all of them before any returns: see groupTicket
		}
		c.out = out
		g.mu.Unlock()
		close(c.done)
	}
	<-c.done
	return c.out[i].Claim, c.out[i].Err
}

// alone commits e by itself, t inside meanwhile.
func (g *GroupCommitter) alone(ctx context.Context, t *groupTicket, e dedup.GroupEntry) (dedup.Claim, error) {
	g.mu.Lock()
	if t != nil && t.state == ticketOutside {
		t.leave(ticketInside)
	}
	yield := t.takeYield()
	g.mu.Unlock()
	call(yield)
	got, err := g.Store.CommitOptimistic(ctx, e.Req, e.Result, e.Writes)
	g.mu.Lock()
	t.back()
	g.mu.Unlock()
	return got, err
}

// flush closes c to new commits and tells its leader to commit now. g.mu held.
func (g *GroupCommitter) flush(c *commitGroup) {
	if g.open == c {
		g.open = nil
	}
	select {
	case <-c.full:
	default:
		close(c.full)
	}
}

func (c *commitGroup) overlaps(ids []string) bool {
	for _, id := range ids {
		if c.ids[id] {
			return true
		}
	}
	return false
}
