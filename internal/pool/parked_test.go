package pool

import (
	"strconv"
	"testing"
	"time"
)

// countUnparked is what batcher.unparked must be: the deletes not parked.
func countUnparked(b *batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for i := range b.deletes {
		if !b.deletes[i].parked {
			n++
		}
	}
	if n != b.unparked {
		return -1 - n
	}
	return n
}

// TestUnparkedCountsTheDeletesNotParked: the count timed reads instead of
// a scan follows every way a delete comes, is unparked and goes (a batch
// taken by age, one full of parked deletes past their latest, all at
// close), so that an add sets the flush timer exactly when it did with the
// scan.
func TestUnparkedCountsTheDeletesNotParked(t *testing.T) {
	t.Parallel()
	c := &batchSQS{changes: map[string]int32{}}
	b := newBatcher(c, "q", time.Hour, func(string, int, error) {})
	check := func(step string, want int) {
		t.Helper()
		if got := countUnparked(b); got != want {
			t.Fatalf("%s: the count says %d unparked (-1-n: it differs from the n there are), want %d", step, got, want)
		}
		if b.timed() != (want > 0) {
			t.Fatalf("%s: timed is %v with %d unparked deletes", step, b.timed(), want)
		}
	}
	now := time.Now()
	for i := range 15 {
		b.deleteParked("p"+strconv.Itoa(i), "g"+strconv.Itoa(i%3), now.Add(time.Hour))
	}
	check("parked only", 0)
	b.delete("d1")
	b.delete("d2")
	check("two deletes", 2)
	b.unpark("g0")
	check("group g0 unparked", 7)
	for b.flushDue(false) { // a full batch goes: 10 taken, the oldest first
	}
	// p0-p9 went (p0, p3, p6, p9 unparked); p12, d1 and d2 wait.
	check("a full batch sent", 3)
	// Parked deletes due by their latest go while parked, the 7 others
	// with them; then two of a group still under way come.
	for i := range 3 {
		b.deleteParked("late"+strconv.Itoa(i), "g9", now.Add(-time.Second))
	}
	for b.flushDue(false) {
	}
	check("parked deletes sent by their latest", 0)
	b.deleteParked("q1", "g1", now.Add(time.Hour))
	b.delete("d3")
	check("one more of each", 1)
	for b.flushDue(true) {
	}
	check("all sent", 0)
	b.sends.Wait()
}
