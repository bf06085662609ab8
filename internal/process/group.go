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
// request. No goroutine of its own: the first commit of a group waits out
// the window and makes the request for all of it; the others wait for its
// answer. A commit that writes an item the open group already writes goes
// alone (DynamoDB refuses two operations on one item in a transaction). A
// commit that the group's transaction gives no verdict on (another's
// condition failed, no answer) is retried alone at once by the caller.
// Safe for concurrent use.
type GroupCommitter struct {
	Store  *dedup.Store
	Window time.Duration

	mu   sync.Mutex
	open *commitGroup
}

// commitGroup is one transaction's worth of commits.
type commitGroup struct {
	entries []dedup.GroupEntry
	ids     map[string]bool // the items its commits write
	items   int
	bytes   int
	full    chan struct{} // closed when no more fit: commit now
	done    chan struct{} // closed when out is set
	out     []dedup.GroupResult
}

// Commit commits e with whatever other commits arrive within the window,
// and returns e's outcome as Store.CommitOptimistic would, or an error
// wrapping dedup.ErrNotAlone.
func (g *GroupCommitter) Commit(ctx context.Context, e dedup.GroupEntry) (dedup.Claim, error) {
	n, size, err := g.Store.Size(e)
	if err != nil {
		// It fails on its own (too large for any transaction, say): not
		// in a group, whose others it would only hold up.
		return g.Store.CommitOptimistic(ctx, e.Req, e.Result, e.Writes)
	}
	ids := g.Store.ItemIDs(e)
	g.mu.Lock()
	c := g.open
	if c != nil && c.overlaps(ids) {
		g.mu.Unlock()
		return g.Store.CommitOptimistic(ctx, e.Req, e.Result, e.Writes)
	}
	if c != nil && (c.items+n > dedup.MaxGroupItems || c.bytes+size > dedup.MaxGroupBytes) {
		g.flush(c) // its commits go now; this one opens the next group
		c = nil
	}
	leader := c == nil
	if leader {
		c = &commitGroup{ids: map[string]bool{}, full: make(chan struct{}), done: make(chan struct{})}
		g.open = c
	}
	i := len(c.entries)
	c.entries = append(c.entries, e)
	c.items += n
	c.bytes += size
	for _, id := range ids {
		c.ids[id] = true
	}
	if c.items >= dedup.MaxGroupItems {
		g.flush(c)
	}
	g.mu.Unlock()

	if leader {
		t := time.NewTimer(g.Window)
		select {
		case <-t.C:
		case <-c.full:
		}
		t.Stop()
		g.mu.Lock()
		if g.open == c {
			g.open = nil
		}
		g.mu.Unlock()
		// Nothing is added to c from here on.
		c.out = g.Store.CommitGroup(ctx, c.entries)
		close(c.done)
	}
	<-c.done
	return c.out[i].Claim, c.out[i].Err
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
