package sim

import (
	"testing"
)

// TestShapeIsTheSeeds: the world's shape is a function of the seed; the
// command line's rate, kinds and operations are kept when given; without
// swarm the shape is the fixed world; over 200 seeds every choice of every
// dimension is taken.
func TestShapeIsTheSeeds(t *testing.T) {
	kinds, _ := ParseKinds("")
	ops, _ := ParseOps("")
	cfg := Config{Seed: 11, Rate: 0.04, Kinds: kinds, Ops: ops, Swarm: true}
	if a, b := drawShape(cfg), drawShape(cfg); a.String() != b.String() {
		t.Fatalf("one seed, two shapes:\n%s\n%s", a, b)
	}
	fixed := cfg
	fixed.Rate, fixed.FixedRate, fixed.FixedKinds, fixed.FixedOps = 0.3, true, true, true
	for seed := range uint64(50) {
		fixed.Seed = seed
		s := drawShape(fixed)
		if s.Rate != 0.3 || len(s.Kinds) != len(kinds) || len(s.Ops) != len(ops) {
			t.Fatalf("seed %d: the command line's faults not kept: %s", seed, s)
		}
	}
	off := cfg
	off.Swarm = false
	if drawShape(off).String() != fixedShape(off).String() {
		t.Fatal("without swarm, the shape is not the fixed world")
	}
	taken := map[string]bool{}
	shapes := map[string]bool{}
	for seed := range uint64(200) {
		cfg.Seed = seed
		s := drawShape(cfg)
		shapes[s.String()] = true
		for _, c := range s.choices() {
			taken[c] = true
		}
	}
	for _, want := range []string{
		"rate=0.01", "rate=0.06", "q1 dedup scope=queue", "q1 dedup scope=messageGroup", "q1 visibility=1m0s",
		"concurrency=1", "concurrency=10", "receivers=2", "max in flight=1", "ack delay=500ms", "retry in place=-1",
		"group commit window=1s", "shutdown timeout=3s", "lambda batch=1", "fail rest=batch",
		"payload hash=json:/account,/amount_cents", "message size=1-16KiB", "message size=16-200KiB",
		"bursts=true", "graceful stops=true",
		"outbox=on", "outbox=off", "outbox groups=12", "outbox relays=3", "outbox per group=1", "outbox sizes=limits", "outbox sizes=big",
		"outbox multi-message writes=true", "outbox limit lowered=true", "outbox batches refused as too long=true",
		"bursts=true", "graceful stops=true", "q1 type=standard", "q2 type=standard",
		"payload hash=mixed", "q1 commit=carried",
	} {
		if !taken[want] {
			t.Errorf("no seed of 200 took %s", want)
		}
	}
	if len(shapes) < 190 {
		t.Errorf("200 seeds drew only %d shapes", len(shapes))
	}
}
