package telemetry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// samples is the sample count of every histogram series, by name and
// labels, and every counter's value.
func samples(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range x.GetLabel() {
				k += " " + l.GetName() + "=" + l.GetValue()
			}
			if h := x.GetHistogram(); h != nil {
				out[k] = float64(h.GetSampleCount())
			} else if c := x.GetCounter(); c != nil {
				out[k] = c.GetValue()
			}
		}
	}
	return out
}

// TestDoneOfAppliedMessagesLandsInTheirQueuesSeries: an applied message
// (the most common: its series are looked up once per queue) counts in
// its queue's series as any other result does, each queue its own.
func TestDoneOfAppliedMessagesLandsInTheirQueuesSeries(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	applied := process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, EffectTook: time.Millisecond, CommitTook: 2 * time.Millisecond, SentAt: time.Now().Add(-time.Second)}
	for range 3 {
		m.Done("a", applied, time.Millisecond)
	}
	m.Done("b", applied, time.Millisecond)
	noTimes := applied
	noTimes.EffectTook, noTimes.CommitTook, noTimes.SentAt = 0, 0, time.Time{}
	m.Done("b", noTimes, time.Millisecond)
	got := samples(t, m)
	want := map[string]float64{
		"exactly_effects_applied_total queue=a":                    3,
		"exactly_effects_applied_total queue=b":                    2,
		"exactly_handler_duration_seconds outcome=applied queue=a": 3,
		"exactly_handler_duration_seconds outcome=applied queue=b": 2,
		"exactly_effect_duration_seconds queue=a":                  3,
		"exactly_effect_duration_seconds queue=b":                  1,
		"exactly_commit_duration_seconds queue=a":                  3,
		"exactly_commit_duration_seconds queue=b":                  1,
		"exactly_message_age_seconds queue=a":                      3,
		"exactly_message_age_seconds queue=b":                      1,
	}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	require.Equal(t, int64(5), m.Totals().Applied.Load())
}

// BenchmarkDone is the metrics of one applied message, the most common
// result. An op is one message.
func BenchmarkDone(b *testing.B) {
	m := telemetry.NewMetrics()
	r := process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, EffectTook: time.Millisecond, CommitTook: time.Millisecond, SentAt: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		m.Done("orders.fifo", r, time.Millisecond)
	}
}
