package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A freeze stops every goroutine of the process at its next call, not only
// the one whose call drew it, and all resume together.
func TestFreezeStopsTheWholeProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &world{start: time.Now(), stats: map[string]int{}, excused: map[int]bool{}, byKey: map[string]*msgSpec{}, wide: newWidened(1)}
		p := w.newProc("w0.0")
		ops, _ := ParseOps("")
		w.inj = newInjector(1, 0, map[Kind]bool{}, ops, nil) // no fault of its own
		go p.freeze(40 * time.Second)                        // the call that drew the freeze
		time.Sleep(time.Second)
		start := time.Now()
		if _, _, err := before(context.Background(), p, "UpdateItem", "k"); err != nil { // the heartbeat's next call
			t.Fatal(err)
		}
		if got := time.Since(start); got < 39*time.Second {
			t.Fatalf("another goroutine's call went through %s into a 40 s freeze", got)
		}
		if p.frozen() {
			t.Fatal("still frozen after the freeze")
		}
		start = time.Now()
		if _, _, err := before(context.Background(), p, "UpdateItem", "k"); err != nil || time.Since(start) != 0 {
			t.Fatalf("a call after the freeze waited %s (err %v)", time.Since(start), err)
		}
	})
}
