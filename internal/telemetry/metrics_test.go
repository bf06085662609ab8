package telemetry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// TestDoneCountsOutcomes: each result lands in its counters, commit retries
// included.
func TestDoneCountsOutcomes(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, CommitRetries: 3}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Duplicate}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Retry, Outcome: dedup.Won, CommitRetries: 2, LeaseLost: true}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Fail, Outcome: dedup.Conflict}, time.Millisecond)
	count := func(name string) float64 {
		t.Helper()
		mfs, err := m.Registry.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == name {
				sum := 0.0
				for _, x := range mf.GetMetric() {
					sum += x.GetCounter().GetValue()
				}
				return sum
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	require.Equal(t, 5.0, count("exactly_commit_retries_total"))
	require.Equal(t, 1.0, count("exactly_effects_applied_total"))
	require.Equal(t, 1.0, count("exactly_duplicates_total"))
	require.Equal(t, 1.0, count("exactly_retries_total"))
	require.Equal(t, 1.0, count("exactly_leases_lost_total"))
	require.Equal(t, 1.0, count("exactly_conflicts_total"))
	require.Equal(t, 1.0, count("exactly_permanent_failures_total"))
}
