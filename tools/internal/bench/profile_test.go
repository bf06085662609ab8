package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAWSProfileTable: each category's µs per message is its share of
// the run's profile times the run's CPU per message, averaged over
// rounds (a round that did not see a category counts 0 there); the
// largest difference against the hand-written consumer comes first.
func TestAWSProfileTable(t *testing.T) {
	t.Parallel()
	run := func(consumer string, round int, cpuSeconds float64, cats ...ProfileShare) Drain {
		var total time.Duration
		for _, c := range cats {
			total += c.Time
		}
		return Drain{Regime: RegimeAWS, Consumer: consumer, Procs: 1, Conc: 16, Round: round, Seconds: 1,
			Window:  Sample{Counts: map[string]float64{"applied": 1000, "cpu_seconds": cpuSeconds}},
			Profile: &CPUProfile{Consumer: consumer, Regime: RegimeAWS, Conc: 16, Total: total, Categories: cats}}
	}
	pool, gc, fakes := "the worker's own code: pool", catGC, "the fakes and the latency layer (aws regime only)"
	r := &Result{Runs: []Drain{
		// 100 µs/msg: pool 50, GC 50; then 200 µs/msg: GC 100, fakes 100.
		run("worker", 1, 0.1, ProfileShare{pool, time.Second}, ProfileShare{gc, time.Second}),
		run("worker", 2, 0.2, ProfileShare{gc, time.Second}, ProfileShare{fakes, time.Second}),
		run("baseline", 1, 0.08, ProfileShare{gc, time.Second}, ProfileShare{fakes, 3 * time.Second}),
		run("worker/carried", 1, 1, ProfileShare{pool, time.Second}), // not profiled in the table
		{Regime: RegimeEmulator, Consumer: "worker", Conc: 16, Profile: &CPUProfile{Total: time.Second}},
	}}
	concs, by := awsProfiles(r)
	require.Equal(t, []int{16}, concs)
	require.InDelta(t, 25, by[16]["worker"][pool], 1e-9, "(50 + 0) / 2")
	require.InDelta(t, 75, by[16]["worker"][gc], 1e-9)
	require.InDelta(t, 50, by[16]["worker"][fakes], 1e-9)
	require.InDelta(t, 150, by[16]["worker"][cpuTotal], 1e-9)
	require.InDelta(t, 20, by[16]["baseline"][gc], 1e-9)
	require.InDelta(t, 60, by[16]["baseline"][fakes], 1e-9)

	var b strings.Builder
	profileMarkdown(&b, r)
	md := b.String()
	require.Contains(t, md, "## Where the worker's CPU goes")
	require.Contains(t, md, "| garbage collector | 75.0 | 20.0 | +55.0 |")
	require.Contains(t, md, "| the worker's own code: pool | 25.0 | 0.0 | +25.0 |")
	require.Contains(t, md, "| the fakes and the latency layer (aws regime only) | 50.0 | 60.0 | -10.0 |")
	require.Contains(t, md, "| "+cpuTotal+" | 150.0 | 80.0 | +70.0 |")
	require.Contains(t, md, "| "+cpuSamples+" | 400 | 400 |  |", "summed over rounds: 2 s + 2 s at 100 Hz; 4 s")
	require.Less(t, strings.Index(md, "garbage collector"), strings.Index(md, "own code: pool"), "largest difference first")
	require.Less(t, strings.Index(md, "own code: pool"), strings.Index(md, "the fakes and"))
}
