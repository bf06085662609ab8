package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// steadySource applies rate messages a second from its start, up to n.
type steadySource struct {
	start time.Time
	rate  float64
	n     int
}

func (s steadySource) sample(context.Context) (Sample, error) {
	now := time.Now()
	applied := min(s.rate*now.Sub(s.start).Seconds(), float64(s.n))
	return Sample{At: now, Counts: map[string]float64{"applied": applied}}, nil
}

// TestWindowKeepsASmallBacklogsWindow: a backlog too small for the
// warm-up at the consumer's rate (the sweep's 1 MiB bodies: 512 messages
// at about 450 a second) ends its warm-up at WarmupShare of the backlog
// and keeps a window of its own; with a 1 s warm-up it ran out during it
// and the window was one 0.25 s sample. A backlog sized for the run keeps
// the whole warm-up and window.
func TestWindowKeepsASmallBacklogsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &harness{cfg: Config{Warmup: time.Second, Window: 3 * time.Second}}
		const n, rate = 512, 450
		s0, s1, err := h.window(t.Context(), &consumer{source: steadySource{time.Now(), rate, n}}, n)
		require.NoError(t, err)
		require.LessOrEqual(t, s0.Counts["applied"], WarmupShare*n+rate*0.25, "the warm-up ends at its share of the backlog")
		require.GreaterOrEqual(t, s1.At.Sub(s0.At), 500*time.Millisecond, "the window measures more than one sample")
		require.Greater(t, s1.Counts["applied"]-s0.Counts["applied"], 0.4*n)
	})
	synctest.Test(t, func(t *testing.T) {
		h := &harness{cfg: Config{Warmup: time.Second, Window: 3 * time.Second}}
		start := time.Now()
		const n, rate = 8000, 1000
		s0, s1, err := h.window(t.Context(), &consumer{source: steadySource{start, rate, n}}, n)
		require.NoError(t, err)
		require.GreaterOrEqual(t, s0.At.Sub(start), time.Second, "a deep backlog's warm-up is the whole Warmup")
		require.Equal(t, 3*time.Second, s1.At.Sub(s0.At), "and its window the whole Window")
	})
}

func TestTimeSpan(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, "2026-12-04 13:15 to 13:23 UTC (7m51s)", timeSpan(at("2026-12-04T13:15:10Z"), at("2026-12-04T13:23:01Z")))
	require.Equal(t, "2026-12-03 19:14 to 2026-12-04 13:31 UTC (18h17m0s)", timeSpan(at("2026-12-03T19:14:00Z"), at("2026-12-04T13:31:00Z")))
}
