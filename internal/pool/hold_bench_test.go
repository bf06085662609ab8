package pool

import (
	"strconv"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/effect"
)

// BenchmarkHoldUnhold is what holding a delivery costs the pool's index,
// from its receive to its settling, with as many others held as at
// concurrency 64 (MaxInFlightFor(64, 8) = 720). An op is one delivery.
func BenchmarkHoldUnhold(b *testing.B) {
	n := MaxInFlightFor(64, ReceiversFor(64, false))
	now := time.Now()
	qs := heldState(true)
	for i := range n {
		qs.hold(&delivery{msg: effect.Message{ID: "message-" + strconv.Itoa(i), Group: "g" + strconv.Itoa(i/10)}, visibleUntil: now.Add(time.Hour)})
	}
	ds := make([]*delivery, 64)
	for i := range ds {
		ds[i] = &delivery{msg: effect.Message{ID: "hot-" + strconv.Itoa(i), Group: "hot" + strconv.Itoa(i)}, visibleUntil: now.Add(time.Hour)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := ds[i%len(ds)]
		i++
		qs.hold(d)
		qs.unhold(d)
	}
}
