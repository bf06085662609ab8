package sim

import (
	"strings"
	"testing"
)

// TestCarriedAndMixedWorlds: carried mode is drawn only in guarded worlds
// and its carriers name their messages; a world of mixed fingerprints sends
// no conflict message and gives its processes both kinds; a carried world
// with mixed fingerprints, without faults, is green and commits at the
// carriers, duplicates found there.
func TestCarriedAndMixedWorlds(t *testing.T) {
	cfg := cleanSwarm()
	var carried, mixed int
	for seed := range uint64(400) {
		cfg.Seed = seed
		s := drawShape(cfg)
		if s.Carried {
			carried++
			if !newWidened(seed).guarded {
				t.Fatalf("seed %d: carried mode in a world whose ledger writes no entry item", seed)
			}
		}
		if !s.MixedPayload {
			continue
		}
		mixed++
		w := &world{shape: s, cfg: cfg, byLid: map[int]*msgSpec{}, byKey: map[string]*msgSpec{}}
		w.workload()
		for _, m := range w.msgs {
			if m.conflict {
				t.Fatalf("seed %d: a conflict message in a world of mixed fingerprints", seed)
			}
		}
	}
	if carried < 20 || mixed < 40 {
		t.Fatalf("of 400 seeds, %d carried and %d mixed worlds", carried, mixed)
	}
	for cfg.Seed = 1; ; cfg.Seed++ {
		if s := drawShape(cfg); s.Carried && s.MixedPayload && !s.Outbox.On && !s.Q1Std {
			break
		}
	}
	res := runSeed(t, cfg)
	if res.Failed() {
		t.Fatalf("seed %d: violations: %v", cfg.Seed, res.Violations)
	}
	if !strings.Contains(res.Shape, "payload hash=mixed, q1 commit=carried") {
		t.Fatalf("seed %d: shape %s", cfg.Seed, res.Shape)
	}
	for _, s := range []string{"pool: carried incarnations", "sim: processes fingerprinting body (mixed)",
		"sim: processes fingerprinting json:/account,/amount_cents (mixed)", "dynamo: optimistic commit tried", "log: duplicate: not run again; deleted"} {
		if res.Stats[s] == 0 {
			t.Errorf("seed %d: %s: none", cfg.Seed, s)
		}
	}
	for _, s := range []string{"pool: optimistic incarnations", "pool: transactional incarnations"} {
		if res.Stats[s] != 0 {
			t.Errorf("seed %d: %s in a carried world: %d", cfg.Seed, s, res.Stats[s])
		}
	}
}
