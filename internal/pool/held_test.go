package pool

import (
	"strconv"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/effect"
)

func heldState(fifo bool) *queueState {
	return &queueState{q: &Queue{FIFO: fifo}, b: &batcher{}, held: map[*delivery]struct{}{}, byID: map[string][]*delivery{}, groups: map[string]int{}}
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
	for _, n := range []int{20, 180, MaxInFlightFor(64, ReceiversFor(64))} {
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
