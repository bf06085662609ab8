package sim

import (
	"strings"
	"testing"
)

// TestStandardQueuesWorld: a seed that draws both source queues standard
// builds them standard (no .fifo, keys without a group, every message with
// its idempotency-key), SQS leaves duplicate deliveries that the product
// recognises, pool workers and Lambda both work the standard Q2, and the run
// is green without faults.
func TestStandardQueuesWorld(t *testing.T) {
	cfg := cleanSwarm()
	for cfg.Seed = 1; ; cfg.Seed++ {
		if s := drawShape(cfg); s.Q1Std && s.Q2Std && !s.Burst {
			break
		}
	}
	res := runSeed(t, cfg)
	if res.Failed() {
		t.Fatalf("seed %d: violations: %v", cfg.Seed, res.Violations)
	}
	if !strings.Contains(res.Shape, "q1 type=standard, q2 type=standard") {
		t.Fatalf("seed %d: shape %s", cfg.Seed, res.Shape)
	}
	for _, s := range []string{"path: SQS duplicate delivery left (standard queue)", "log: duplicate: not run again; deleted", "lambda: invocations", "lambda: duplicates", "workload: dup-in-window"} {
		if res.Stats[s] == 0 {
			t.Errorf("seed %d: %s: none (stats %v)", cfg.Seed, s, res.Stats)
		}
	}
	w := &world{shape: drawShape(cfg), cfg: cfg, byLid: map[int]*msgSpec{}, byKey: map[string]*msgSpec{}}
	w.workload()
	for _, s := range w.msgs {
		if s.keyAttr == "" || !strings.HasPrefix(s.key, namespace+"#q") || strings.Contains(s.key, ".fifo") || strings.Count(s.key, "#") != 2 {
			t.Fatalf("message %d of a standard queue: key attribute %q, key %q", s.lid, s.keyAttr, s.key)
		}
		if in := w.sendInput(s, s.sends[0]); in.MessageGroupId != nil || in.MessageDeduplicationId != nil {
			t.Fatalf("message %d sent to a standard queue with a group or a dedup id", s.lid)
		}
	}
}

// cleanSwarm is the whole world (three pool workers, two Lambda pollers),
// its shape drawn from the seed, without faults.
func cleanSwarm() Config {
	all, _ := ParseKinds("")
	allOps, _ := ParseOps("")
	return Config{Rate: 0, FixedRate: true, Kinds: all, Ops: allOps, Workers: 3, Lambdas: 2, Swarm: true}
}
