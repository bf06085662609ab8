package sim

import (
	"fmt"
	"testing"
)

// TestSeedsReplay fails if a seed stops replaying exactly: a call path that
// reaches the fakes without a step of the sequencer (sequencer.go), a
// place where goroutines of one process that one event wakes race without
// a step (exactly.TestConfig.Step), a select whose random pick among ready
// cases changes what happens, a map iteration that reaches the trace,
// randomness not drawn from the seed. Each case runs twice and the two
// digests (faults with their instants, statistics, every message's story)
// must agree, and the second, replaying the first's recording
// (record.go), must take every recorded step and no other: twelve seeds of the whole world (three pool workers, two
// Lambda pollers, each seed its own shape) without faults, six with the
// seed's faults as the budget runs them, and two seeds of the chain
// (TestChain: producer, outbox, relays, two worker stages) with faults.
// Seeds 1 to 600 replayed exactly with and without faults, and the
// chain's first 100; under the race detector, whose scheduler picks at
// random among runnable goroutines, seeds 1 to 40 (docs/TESTING.md, "What
// a seed fixes"). Without the sequencer, none do.
func TestSeedsReplay(t *testing.T) {
	kinds, err := ParseKinds("")
	if err != nil {
		t.Fatal(err)
	}
	type replayCase struct {
		seed          uint64
		faults, chain bool
	}
	var cases []replayCase
	for seed := range uint64(12) {
		cases = append(cases, replayCase{seed: seed + 1})
	}
	for seed := range uint64(6) {
		cases = append(cases, replayCase{seed: seed + 1, faults: true})
	}
	cases = append(cases, replayCase{seed: 1, faults: true, chain: true}, replayCase{seed: 2, faults: true, chain: true})
	for _, c := range cases {
		name := fmt.Sprintf("seed=%d/faults=%v/chain=%v", c.seed, c.faults, c.chain)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Seed: c.seed, Rate: defaultRate, Kinds: kinds, Workers: 3, Lambdas: 2, Swarm: true, LogSteps: true}
			if !c.faults {
				cfg.Ops, cfg.FixedOps = map[string]bool{}, true
			}
			run := runSeed
			if c.chain {
				run = runChainSeed
			}
			a := run(t, cfg)
			cfg.Want = a.Record // the second run replays the first's recording
			b := run(t, cfg)
			if !c.faults && a.Failed() {
				t.Errorf("seed %d (no faults) is red: %v", c.seed, first(a.Violations, 3))
			}
			if b.Diverged != nil {
				t.Errorf("seed %d left its recording at %s", c.seed, b.Diverged)
			}
			if a.Digest() != b.Digest() {
				t.Errorf("seed %d replayed differently: %s%s", c.seed, firstDiff(a, b), stepDiff(a.Steps, b.Steps))
			}
		})
	}
}

// TestDeathsReplay fails if a process's death lets its goroutines race:
// the call that dies wakes, at that instant, its pool's stop (the chain
// stops a dead worker at once), its long polls' cancels and its lanes,
// and without a step after the death (before and after, clients.go) and
// a step before a woken poll looks at its context (memsqs.WithWake) they
// run in the runtime's order: a claim's retry sees the stop or not, a
// poll takes what a delete freed or gives up; and the batches its lanes
// hand back in come in the runtime's order (leastEntry names them by
// their entries, chain_clients.go). Only crashes, often: each seed's
// recording is replayed twice and must be taken step by step. Before
// those steps about one replay in five of such chain seeds left its
// recording (one in three under the race detector).
func TestDeathsReplay(t *testing.T) {
	kinds, err := ParseKinds("crash,crash-after")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps("")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{3, 4, 5, 6} {
		t.Run(fmt.Sprint("chain seed ", seed), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Seed: seed, Rate: 0.1, Kinds: kinds, Ops: ops}
			a := runChainSeed(t, cfg)
			if n := a.Stats["chain: died (crash after)"] + a.Stats["chain: died (crash before)"]; n < 10 {
				t.Fatalf("seed %d: %d deaths; the test wants many", seed, n)
			}
			cfg.Want = a.Record
			for i := range 2 {
				if b := runChainSeed(t, cfg); b.Diverged != nil {
					t.Fatalf("seed %d, replay %d: left its recording at %s", seed, i+1, b.Diverged)
				}
			}
		})
	}
}
