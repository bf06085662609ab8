package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSeamIsTheSeeds: the randomness a process hands the product through
// exactly.Config.Test is a function of the seed and the process's name:
// the same for a replay, another for another process or seed.
func TestSeamIsTheSeeds(t *testing.T) {
	draw := func(seed uint64, proc string) [4]uint64 {
		w := &world{cfg: Config{Seed: seed}}
		r := rand.New(w.testSeam(proc, time.Now).Rand)
		return [4]uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
	}
	a, replay := draw(7, "w0.1"), draw(7, "w0.1")
	if a != replay {
		t.Fatal("a replay draws otherwise")
	}
	if a == draw(7, "w0.2") || a == draw(8, "w0.1") {
		t.Fatal("two processes or two seeds draw alike")
	}
}
