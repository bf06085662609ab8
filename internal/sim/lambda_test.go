package sim

import "testing"

// TestLambdaRunsTheProductWiring: the simulation's Lambda environments are
// built by exactly.NewLambdaHandler, not told about Q2 (its attributes are
// read at the first event) and answer invocations; without faults the run is
// green, and start-up faults alone (every start-up read fails or stalls at
// a high rate) cost invocations, never an invariant.
func TestLambdaRunsTheProductWiring(t *testing.T) {
	all, _ := ParseKinds("")
	allOps, _ := ParseOps("")
	startup, err := ParseOps("GetQueueUrl,GetQueueAttributes,DescribeTable,DescribeTimeToLive")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rate float64
		ops  map[string]bool
	}{{"no faults", 0, allOps}, {"start-up faults", 0.3, startup}} {
		t.Run(c.name, func(t *testing.T) {
			res := runSeed(t, Config{Seed: 3, Rate: c.rate, Kinds: all, Ops: c.ops, Workers: 3, Lambdas: 2})
			if res.Failed() {
				t.Fatalf("violations: %v", res.Violations)
			}
			for _, s := range []string{"lambda: cold starts", "log: queue that is not listed read", "lambda: invocations"} {
				// With start-up faults, scheduling decides which cold starts
				// succeed: the pool may take every message meanwhile.
				if res.Stats[s] == 0 && (c.rate == 0 || s == "lambda: cold starts") {
					t.Errorf("%s: none (stats %v)", s, res.Stats)
				}
			}
			if c.rate > 0 && res.Stats["lambda: cold start failed"]+res.Stats["process: died (init-timeout:)"]+res.Stats["log: start-up call failed; trying again"] == 0 {
				t.Errorf("start-up faults had no effect (stats %v)", res.Stats)
			}
		})
	}
}
