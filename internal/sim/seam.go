package sim

import (
	"math/rand/v2"
	"time"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/jitter"
)

// testSeam is what a process of the run hands the product through
// exactly.Config.Test: its skewed clock, and a source of randomness drawn
// from the seed and the process's name, so that the product's jitter and
// tokens replay with the seed, and the sequencer's steps where a Worker's
// or a Lambda handler's goroutines that one event wakes would race
// (sequencer.go).
func (w *world) testSeam(proc string, now func() time.Time) exactly.TestConfig {
	t := exactly.TestConfig{Now: now, Rand: rand.NewPCG(w.cfg.Seed, hash64(w.cfg.Seed, "rand", proc))}
	if w.seq != nil {
		t.Step = func(what string) { w.seq.step(proc, "seam", what) }
	}
	return t
}

// seededRand is what process who draws outside a Worker (outbox.Write's
// and the relay's retry jitter), from the seed: safe for concurrent use,
// as the relay needs.
func seededRand(seed uint64, who string) *jitter.Rand {
	return jitter.New(rand.NewPCG(seed, hash64(seed, "outside rand", who)))
}
