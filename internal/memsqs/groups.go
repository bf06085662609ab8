package memsqs

import (
	"container/heap"
	"time"
)

// groupIndex orders a FIFO queue's groups for receive, so that a receive
// costs the logarithm of the number of groups, not the number: a group is
// waiting, keyed by the instant it may next be handed out (its head's delay
// and its received messages' visibility timeouts ended), until a receive at
// or after that instant moves it to ready, keyed by its head's sequence
// number, oldest first. A group's place is recomputed (touch) whenever its
// messages change; time passing alone only ever makes a waiting group ready,
// which is what promote does.
type groupIndex struct {
	ready   groupHeap // receivable now, by head sequence number
	waiting groupHeap // by receivableAt
}

func newGroupIndex() groupIndex {
	return groupIndex{
		ready: groupHeap{less: func(a, b *group) bool { return seqLess(a.head, b.head) }},
		waiting: groupHeap{less: func(a, b *group) bool {
			if !a.receivableAt.Equal(b.receivableAt) {
				return a.receivableAt.Before(b.receivableAt)
			}
			return seqLess(a.head, b.head)
		}},
	}
}

// touch re-places g after its messages changed; an empty group leaves the
// index.
func (x *groupIndex) touch(g *group) {
	if g.in != nil {
		heap.Remove(g.in, g.idx)
	}
	front := g.msgs.Front()
	if front == nil {
		return
	}
	head := front.Value.(*message)
	g.head = head.seq
	g.receivableAt = head.delayUntil
	for e := front; e != nil; e = e.Next() {
		m := e.Value.(*message)
		if m.receives == 0 {
			break // received messages are a prefix of their group
		}
		g.receivableAt = later(g.receivableAt, m.visibleAt)
	}
	heap.Push(&x.waiting, g)
}

// promote moves the groups that became receivable by now to ready.
func (x *groupIndex) promote(now time.Time) {
	for x.waiting.Len() > 0 && !x.waiting.gs[0].receivableAt.After(now) {
		heap.Push(&x.ready, heap.Pop(&x.waiting))
	}
}

// next takes the oldest ready group out of the index (the caller touches
// it when done with it), or nil.
func (x *groupIndex) next() *group {
	if x.ready.Len() == 0 {
		return nil
	}
	return heap.Pop(&x.ready).(*group)
}

// nextChange is the earliest instant after now at which a group becomes
// receivable without anyone acting.
func (x *groupIndex) nextChange(now time.Time) (time.Time, bool) {
	x.promote(now)
	if x.waiting.Len() == 0 {
		return time.Time{}, false
	}
	return x.waiting.gs[0].receivableAt, true
}

// groupHeap is a container/heap of groups that know their place in it.
type groupHeap struct {
	gs   []*group
	less func(a, b *group) bool
}

func (h *groupHeap) Len() int           { return len(h.gs) }
func (h *groupHeap) Less(i, j int) bool { return h.less(h.gs[i], h.gs[j]) }
func (h *groupHeap) Swap(i, j int) {
	h.gs[i], h.gs[j] = h.gs[j], h.gs[i]
	h.gs[i].idx, h.gs[j].idx = i, j
}

func (h *groupHeap) Push(x any) {
	g := x.(*group)
	g.in, g.idx = h, len(h.gs)
	h.gs = append(h.gs, g)
}

func (h *groupHeap) Pop() any {
	n := len(h.gs) - 1
	g := h.gs[n]
	h.gs[n] = nil
	h.gs = h.gs[:n]
	g.in, g.idx = nil, -1
	return g
}
