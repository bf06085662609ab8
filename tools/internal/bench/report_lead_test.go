package bench

import (
	"strings"
	"testing"
)

// TestAWSLeadStatesTheRatios: the aws-like section's first sentence gives
// each worker mode's rate over the hand-written consumer's at every
// concurrency, and the load of the run, from the runs themselves.
func TestAWSLeadStatesTheRatios(t *testing.T) {
	t.Parallel()
	d := func(consumer string, conc int, rate float64) Drain {
		return Drain{Regime: RegimeAWS, Consumer: consumer, Procs: 1, Conc: conc, Rate: rate, Seconds: 1}
	}
	r := &Result{LoadBefore: "0.50 0.40 0.30", LoadAfter: "1.00 0.90 0.80", Runs: []Drain{
		d("baseline", 2, 100), d("worker", 2, 125), d("worker/grouped", 2, 500),
		d("baseline", 16, 800), d("worker", 16, 960), d("worker/grouped", 16, 1600),
		d("worker", 64, 999), // no baseline at 64: no ratio
	}}
	got := r.awsLead()
	for _, want := range []string{"At concurrency 2, 16,", "worker ×1 1.25, 1.20×;", "worker ×1 (grouped) 5.00, 2.00×", "load average 0.50 0.40 0.30 at the run's start, 1.00 0.90 0.80 at its end"} {
		if !strings.Contains(got, want) {
			t.Errorf("awsLead() = %q, want it to contain %q", got, want)
		}
	}
	if (&Result{}).awsLead() != "No saturated run of this regime." {
		t.Errorf("awsLead of no runs = %q", (&Result{}).awsLead())
	}
}
