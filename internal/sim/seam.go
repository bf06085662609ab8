package sim

import (
	"math/rand/v2"
	"time"

	"github.com/exactlyonce/exactly"
)

// testSeam is what a process of the run hands the product through
// exactly.Config.Test: its skewed clock, and a source of randomness drawn
// from the seed and the process's name, so that the product's jitter and
// tokens replay with the seed.
func (w *world) testSeam(proc string, now func() time.Time) exactly.TestConfig {
	return exactly.TestConfig{Now: now, Rand: rand.NewPCG(w.cfg.Seed, hash64(w.cfg.Seed, "rand", proc))}
}
