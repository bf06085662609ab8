package pool

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkAddDelete is the batcher's add of a message's delete while
// other groups under way have parked theirs: at concurrency 64 on a FIFO
// queue of groups of 10, about 64 groups with up to 9 parked each. An op
// is one add (the entry is dropped after it, so that the list keeps its
// length).
func BenchmarkAddDelete(b *testing.B) {
	for _, parked := range []int{0, 90, 576} {
		b.Run("parked="+strconv.Itoa(parked), func(b *testing.B) {
			bt := newBatcher(nil, "q", time.Hour, func(string, int, error) {})
			latest := time.Now().Add(time.Hour)
			for i := range parked {
				bt.deleteParked("r"+strconv.Itoa(i), "g"+strconv.Itoa(i/9), latest)
			}
			b.ReportAllocs()
			for b.Loop() {
				bt.deleteParked("r", "hot", latest)
				bt.mu.Lock()
				bt.deletes = bt.deletes[:parked]
				bt.mu.Unlock()
			}
		})
	}
}
