package sim

import (
	"fmt"
	"sync"
	"testing"
)

// TestSeedsReplay fails if seeds stop replaying exactly: a call path that
// reaches the fakes without a step of the sequencer (sequencer.go), a map
// iteration that reaches the trace, randomness not drawn from the seed.
// Twelve seeds of the whole world (three pool workers, two Lambda pollers,
// each seed its own shape) without faults run twice each, and their
// digests (faults, statistics, every message's story) must agree for at
// least nine: with the sequencer, 97 seeds of 100 replay exactly; without
// it, none do. Under the race detector, whose instrumentation reorders the
// goroutines inside a process more often (21 of 30 replay), at least four.
// The seeds with faults replay less often (about 4 in 5, docs/TESTING.md)
// and are measured, not tested: TestReplayMeasure.
func TestSeedsReplay(t *testing.T) {
	const seeds = 12
	need := 9
	if raceOn {
		need = 4
	}
	kinds, err := ParseKinds("")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	exact := 0
	t.Run("seeds", func(t *testing.T) {
		for pair := range seeds / 2 {
			t.Run(fmt.Sprint(pair), func(t *testing.T) {
				t.Parallel()
				for _, seed := range []uint64{uint64(2*pair + 1), uint64(2*pair + 2)} {
					cfg := Config{Seed: seed, Rate: defaultRate, Kinds: kinds, Workers: 3, Lambdas: 2, Swarm: true, Ops: map[string]bool{}, FixedOps: true, LogSteps: true}
					a, b := runSeed(t, cfg), runSeed(t, cfg)
					if a.Failed() {
						t.Errorf("seed %d (no faults) is red: %v", seed, first(a.Violations, 3))
					}
					if a.Digest() != b.Digest() {
						t.Logf("seed %d replayed differently: %s%s", seed, firstDiff(a, b), stepDiff(a.Steps, b.Steps))
						continue
					}
					mu.Lock()
					exact++
					mu.Unlock()
				}
			})
		}
	})
	if exact < need {
		t.Fatalf("%d of %d seeds replayed exactly, want at least %d", exact, seeds, need)
	}
	t.Logf("%d of %d seeds replayed exactly", exact, seeds)
}
