package jitter

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestSeededRandReplays(t *testing.T) {
	a, b := New(rand.NewPCG(1, 2)), New(rand.NewPCG(1, 2))
	for i := range 100 {
		if x, y := a.Between(time.Second), b.Between(time.Second); x != y || x < 500*time.Millisecond || x > time.Second {
			t.Fatalf("draw %d: %s and %s", i, x, y)
		}
		x, _ := a.ID()
		y, _ := b.ID()
		if x != y || len(x) != 32 {
			t.Fatalf("id %d: %q and %q", i, x, y)
		}
	}
	c := New(rand.NewPCG(1, 3))
	x, _ := a.ID()
	y, _ := c.ID()
	if x == y {
		t.Fatal("another seed gave the same id")
	}
}

func TestNilRandIsTheRuntimes(t *testing.T) {
	var r *Rand
	if New(nil) != nil {
		t.Fatal("New(nil) is not the runtime's")
	}
	x, err := r.ID()
	y, _ := r.ID()
	if err != nil || x == y || len(x) != 32 {
		t.Fatalf("ids %q %q %v", x, y, err)
	}
	if d := r.Between(time.Second); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("Between: %s", d)
	}
}

// TestBackoffDoublesUpToItsCap: attempt n waits base × 2^(n-1), jittered in
// its upper half, and never more than the cap.
func TestBackoffDoublesUpToItsCap(t *testing.T) {
	r := New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{0, 500 * time.Millisecond, time.Second},
		{1, 500 * time.Millisecond, time.Second},
		{3, 2 * time.Second, 4 * time.Second},
		{9, 5 * time.Second, 10 * time.Second}, // 256 s capped at 10 s
		{200, 5 * time.Second, 10 * time.Second},
	} {
		for range 100 {
			if d := r.Backoff(tc.attempt, time.Second, 10*time.Second); d < tc.lo || d > tc.hi {
				t.Fatalf("attempt %d: %s not in [%s, %s]", tc.attempt, d, tc.lo, tc.hi)
			}
		}
	}
}
