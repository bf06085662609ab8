package pool

import (
	"strconv"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/effect"
)

func heldState(fifo bool) *queueState {
	return &queueState{q: &Queue{FIFO: fifo}, b: &batcher{}, held: map[*delivery]struct{}{}, byID: map[string]*delivery{}, groups: map[string]int{}}
}

// TestHoldsFollowsEveryReceiptOfAMessage: holds answers for a message
// through any of its held receipts, not through a lost or lapsed one, and
// forgets a message once none of its receipts is held (the index by ID
// must not keep what the pool let go).
func TestHoldsFollowsEveryReceiptOfAMessage(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	qs := heldState(false)
	first := &delivery{msg: effect.Message{ID: "m"}, visibleUntil: now.Add(-time.Second)} // lapsed
	second := &delivery{msg: effect.Message{ID: "m"}, visibleUntil: now.Add(time.Minute)}
	other := &delivery{msg: effect.Message{ID: "o"}, visibleUntil: now.Add(time.Minute)}
	for _, d := range []*delivery{first, second, other} {
		qs.hold(d)
	}
	if !qs.holds(first, now) {
		t.Fatal("not held through its newer receipt")
	}
	second.lost = true
	if qs.holds(first, now) {
		t.Fatal("held through a lost receipt and a lapsed one")
	}
	second.lost = false
	qs.unhold(second)
	if qs.holds(first, now) {
		t.Fatal("held through a receipt the pool let go")
	}
	qs.unhold(first)
	qs.unhold(other)
	if len(qs.byID) != 0 || len(qs.held) != 0 {
		t.Fatalf("the pool holds nothing, yet its index keeps %d message(s)", len(qs.byID))
	}
}

// BenchmarkHolds is Hooks.Held's question (asked on every commit) with
// n deliveries held: MaxInFlightFor(64, 8) = 720 at concurrency 64. An op
// is one question.
func BenchmarkHolds(b *testing.B) {
	for _, n := range []int{20, 180, MaxInFlightFor(64, ReceiversFor(64, false))} {
		b.Run("held="+strconv.Itoa(n), func(b *testing.B) {
			now := time.Now()
			qs := heldState(true)
			ds := make([]*delivery, n)
			for i := range ds {
				ds[i] = &delivery{msg: effect.Message{ID: "message-" + strconv.Itoa(i), Group: "g" + strconv.Itoa(i/10)}, visibleUntil: now.Add(time.Hour)}
				qs.mu.Lock()
				qs.hold(ds[i])
				qs.mu.Unlock()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if !qs.holds(ds[i%n], now) {
					b.Fatal("not held")
				}
			}
		})
	}
}

// TestUnholdKeepsTheOtherReceiptsOfAMessage: letting go of any one of a
// message's held receipts (the newest, the oldest, one between) leaves
// the others answering for it.
func TestUnholdKeepsTheOtherReceiptsOfAMessage(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	for drop := range 3 {
		qs := heldState(true)
		ds := make([]*delivery, 3)
		for i := range ds {
			ds[i] = &delivery{msg: effect.Message{ID: "m", Group: "g"}, visibleUntil: now.Add(time.Minute)}
			qs.hold(ds[i])
		}
		qs.unhold(ds[drop])
		for i, d := range ds {
			if i == drop {
				continue
			}
			d.lost = true
			if !qs.holds(d, now) {
				t.Fatalf("receipt %d let go: the message is no longer held through the third", drop)
			}
			d.lost = false
		}
		for i, d := range ds {
			if i != drop {
				qs.unhold(d)
			}
		}
		if len(qs.byID) != 0 || qs.holds(ds[0], now) {
			t.Fatalf("receipt %d let go first: the index keeps the message after all its receipts went", drop)
		}
	}
}

// TestHoldingAllocatesNothing: holding a delivery and letting it go cost
// the index no allocation (a slice per message ID did: one per message).
func TestHoldingAllocatesNothing(t *testing.T) {
	qs := heldState(true)
	other := &delivery{msg: effect.Message{ID: "o", Group: "g"}}
	qs.hold(other)
	d := &delivery{msg: effect.Message{ID: "m", Group: "g"}}
	if n := testing.AllocsPerRun(100, func() { qs.hold(d); qs.unhold(d) }); n != 0 {
		t.Fatalf("holding a delivery allocates %.0f times", n)
	}
}
