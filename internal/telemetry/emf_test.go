package telemetry_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// emfLines decodes the EMF lines written to b since it was last reset.
func emfLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		out = append(out, doc)
	}
	b.Reset()
	return out
}

// TestEMFLines: one line per queue and period in the Embedded Metric
// Format: the envelope names the namespace, the Queue dimension and every
// metric with its unit; the counts are the period's own; latencies are
// samples; a period with nothing writes nothing.
func TestEMFLines(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	e := telemetry.NewEMF(&b, "")
	e.Received("orders.fifo", 3)
	e.Done("orders.fifo", process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, EffectTook: 1500 * time.Microsecond, CommitTook: 4 * time.Millisecond}, 0)
	e.Done("orders.fifo", process.Result{Action: process.Delete, Outcome: dedup.Duplicate}, 0)
	e.Done("orders.fifo", process.Result{Action: process.Fail, Outcome: dedup.Conflict}, 0)
	e.Done("mail.fifo", process.Result{Action: process.Retry, Outcome: dedup.Won, LeaseLost: true}, 0)
	e.Done("mail.fifo", process.Result{Action: process.Retry, Outcome: dedup.Busy}, 0)
	e.ReturnedNearRedrive("orders.fifo", 2)
	at := time.UnixMilli(1_795_000_000_123)
	require.NoError(t, e.Flush(at))
	lines := emfLines(t, &b)
	require.Len(t, lines, 2)
	mail, orders := lines[0], lines[1] // sorted by queue
	require.Equal(t, "orders.fifo", orders["Queue"])
	aws := orders["_aws"].(map[string]any)
	require.EqualValues(t, 1_795_000_000_123, aws["Timestamp"])
	dir := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, "exactly", dir["Namespace"])
	require.Equal(t, []any{[]any{"Queue"}}, dir["Dimensions"])
	units := map[string]string{}
	for _, m := range dir["Metrics"].([]any) {
		mm := m.(map[string]any)
		units[mm["Name"].(string)] = mm["Unit"].(string)
		require.Contains(t, orders, mm["Name"], "every metric named has its value")
	}
	for _, n := range []string{"Received", "Applied", "Duplicates", "Conflicts", "Busy", "Retries", "PermanentFailures", "LeasesLost", "ReturnedNearRedrive"} {
		require.Equal(t, "Count", units[n], n)
	}
	require.Equal(t, "Milliseconds", units["EffectLatency"])
	require.Equal(t, "Milliseconds", units["CommitLatency"])
	require.EqualValues(t, 3, orders["Received"])
	require.EqualValues(t, 1, orders["Applied"])
	require.EqualValues(t, 1, orders["Duplicates"])
	require.EqualValues(t, 1, orders["Conflicts"])
	require.EqualValues(t, 1, orders["PermanentFailures"])
	require.EqualValues(t, 0, orders["Retries"])
	require.EqualValues(t, 2, orders["ReturnedNearRedrive"])
	require.EqualValues(t, 0, mail["ReturnedNearRedrive"])
	require.Equal(t, []any{1.5}, orders["EffectLatency"])
	require.Equal(t, []any{4.0}, orders["CommitLatency"])
	require.EqualValues(t, 1, mail["LeasesLost"])
	require.EqualValues(t, 1, mail["Retries"], "busy is not a retry")
	require.EqualValues(t, 1, mail["Busy"])
	require.NotContains(t, mail, "EffectLatency", "no sample, no metric")

	// The next period starts from zero, and an idle one writes nothing.
	require.NoError(t, e.Flush(at.Add(time.Minute)))
	require.Empty(t, emfLines(t, &b))
	e.Done("orders.fifo", process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true}, 0)
	require.NoError(t, e.Flush(at.Add(2*time.Minute)))
	lines = emfLines(t, &b)
	require.Len(t, lines, 1)
	require.EqualValues(t, 1, lines[0]["Applied"])
	require.EqualValues(t, 0, lines[0]["Received"])

	// At most 100 samples a line, the format's limit.
	for range 150 {
		e.Done("q", process.Result{Action: process.Delete, Applied: true, EffectTook: time.Millisecond}, 0)
	}
	require.NoError(t, e.Flush(at))
	lines = emfLines(t, &b)
	require.Len(t, lines[0]["EffectLatency"], 100)
	require.EqualValues(t, 150, lines[0]["Applied"])

	// A worker's messages held, one line without dimensions, every flush.
	e.InFlight(5)
	e.InFlight(-2)
	require.NoError(t, e.Flush(at))
	lines = emfLines(t, &b)
	require.Len(t, lines, 1)
	require.EqualValues(t, 3, lines[0]["InFlight"])
	require.Equal(t, []any{[]any{}}, lines[0]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"])
	require.NoError(t, e.Flush(at))
	require.EqualValues(t, 3, emfLines(t, &b)[0]["InFlight"], "a level, not a count: written again")

	e = telemetry.NewEMF(&b, "payments")
	e.Received("q", 1)
	require.NoError(t, e.Flush(at))
	require.Equal(t, "payments", emfLines(t, &b)[0]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Namespace"])
}
