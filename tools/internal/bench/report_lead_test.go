package bench

import (
	"strings"
	"testing"
)

// TestAWSLeadStatesTheRatios: the aws-like section's first sentence gives
// each worker mode's rate over the hand-written consumer's at every
// concurrency, from the runs themselves (the table beside it has each
// run's load).
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
	for _, want := range []string{"At concurrency 2, 16,", "worker ×1 1.25, 1.20×;", "worker ×1 (grouped) 5.00, 2.00×."} {
		if !strings.Contains(got, want) {
			t.Errorf("awsLead() = %q, want it to contain %q", got, want)
		}
	}
	if (&Result{}).awsLead() != "No saturated run of this regime." {
		t.Errorf("awsLead of no runs = %q", (&Result{}).awsLead())
	}
}

// TestThroughputTableShowsEachRunsLoad: a run that kept the machine's load
// shows it in its row; results from before it show the column only when
// some run has it.
func TestThroughputTableShowsEachRunsLoad(t *testing.T) {
	t.Parallel()
	r := &Result{Runs: []Drain{
		{Regime: RegimeAWS, Consumer: "baseline", Procs: 1, Conc: 2, Rate: 100, Seconds: 1, Load: "3.25 2.00 1.00"},
		{Regime: RegimeAWS, Consumer: "worker", Procs: 1, Conc: 2, Rate: 120, Seconds: 1},
	}}
	tab := r.throughputTable(RegimeAWS)
	if last := tab.head[len(tab.head)-1]; last != "load (1 min) at start" {
		t.Fatalf("last column %q, want the load", last)
	}
	if got := tab.rows[0][len(tab.rows[0])-1]; got != "3.25" {
		t.Errorf("hand-written row's load %q, want 3.25", got)
	}
	if got := tab.rows[1][len(tab.rows[1])-1]; got != "-" {
		t.Errorf("a run without a load shows %q, want -", got)
	}
	r.Runs[0].Load = ""
	if h := r.throughputTable(RegimeAWS).head; h[len(h)-1] == "load (1 min) at start" {
		t.Error("no run kept a load, and the column is there")
	}
}

// TestTargetsTableShowsTheirRunsLoads: a target's row carries the load as
// each run it compares began, the worker's first.
func TestTargetsTableShowsTheirRunsLoads(t *testing.T) {
	t.Parallel()
	r := &Result{Config: Config{Concurrency: []int{2}}, Runs: []Drain{
		{Regime: RegimeAWS, Consumer: "baseline", Procs: 1, Conc: 2, Rate: 100, Seconds: 1, Load: "3.25 2.00 1.00"},
		{Regime: RegimeAWS, Consumer: "worker", Procs: 1, Conc: 2, Rate: 120, Seconds: 1, Load: "1.50 2.00 1.00"},
	}}
	tab := r.targetsTable()
	if last := tab.head[len(tab.head)-1]; last != "load (1 min) at start" {
		t.Fatalf("last column %q, want the load", last)
	}
	if len(tab.rows) == 0 || tab.rows[0][0] != "rate × hand-written" {
		t.Fatalf("first row %v, want the worker's rate target", tab.rows)
	}
	if got := tab.rows[0][len(tab.rows[0])-1]; got != "1.50/3.25" {
		t.Errorf("the rate target's load %q, want 1.50/3.25 (worker/hand-written)", got)
	}
}
