package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/builtin"
)

// TestSendEffectsQuantiles: the window's messages give the samples, each
// from its send's start to its first effect, whichever of the two is
// recorded first; warm-up messages, redeliveries and messages nobody sent
// give none; the quantiles are the samples' nearest ranks.
func TestSendEffectsQuantiles(t *testing.T) {
	t.Parallel()
	r := newSendEffects()
	t0 := time.Unix(1000, 0)
	for i := 1; i <= 100; i++ {
		id := "m" + strconv.Itoa(i)
		at := t0.Add(time.Duration(i) * time.Second)
		if i%2 == 0 {
			r.sentAt(id, at, true)
			r.effectAt(id, at.Add(time.Duration(i)*time.Millisecond))
		} else {
			// The effect starts before the send returns the message id.
			r.effectAt(id, at.Add(time.Duration(i)*time.Millisecond))
			r.sentAt(id, at, true)
		}
		r.effectAt(id, at.Add(time.Hour)) // a redelivery: the first effect counts
	}
	r.sentAt("warm", t0, false)
	r.effectAt("warm", t0.Add(time.Hour))
	r.effectAt("prefilled", t0)
	v := r.read()
	require.Equal(t, pacedReading{Sent: 100, Measured: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond}, v)
	require.Empty(t, r.pending)

	// Exported as the gauges the harness reads, in the text format it scrapes.
	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	s, err := parseMetrics(w.Body, t0)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"paced_sent": 100, "paced_measured": 100, "send_effect_p50": 0.05, "send_effect_p99": 0.099, "paced_offered": 0, "paced_done": 0}, s.Counts)
	require.Equal(t, pacedReading{}, newSendEffects().read(), "no samples: zeros")
}

// TestSendEffectsEarlyIsBounded: effects no send claims are pruned once
// they are old.
func TestSendEffectsEarlyIsBounded(t *testing.T) {
	t.Parallel()
	r := newSendEffects()
	t0 := time.Unix(1000, 0)
	for i := range 5 * earlyCap {
		r.effectAt("p"+strconv.Itoa(i), t0.Add(time.Duration(i)*earlyAge/earlyCap))
	}
	require.LessOrEqual(t, len(r.early), 2*earlyCap)
}

// TestProducerPace: the producer sends message first+k at k/rate over
// virtual time, the window's messages after the warm-up's, and stops at
// the window's end; a group's messages keep their order though each send
// outlasts the interval.
func TestProducerPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		var order = map[int][]int{}
		start := time.Now()
		rec := newSendEffects()
		p := &producer{rate: 200, warmup: time.Second, window: 3 * time.Second, first: 7, lanes: 5, lane: func(i int) int { return i % 5 }, rec: rec,
			send: func(ctx context.Context, i int) (string, error) {
				mu.Lock()
				at = append(at, time.Since(start))
				order[i%5] = append(order[i%5], i)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // four times the interval
				rec.effectAt("id"+strconv.Itoa(i), time.Now())
				return "id" + strconv.Itoa(i), nil
			}}
		p.run(context.Background())
		require.Len(t, at, 800, "warm-up and window at 200 msg/s")
		require.Equal(t, 4*time.Second-5*time.Millisecond+20*time.Millisecond, time.Since(start), "the last send at 3.995 s, and it returns")
		for g, is := range order {
			for j := 1; j < len(is); j++ {
				require.Less(t, is[j-1], is[j], "group %d in order", g)
			}
		}
		require.Equal(t, 7, order[2][0], "message first is the first sent")
		v := rec.read()
		require.Equal(t, 600, v.Sent, "the window's messages")
		require.Equal(t, 600, v.Measured)
		require.Equal(t, 20*time.Millisecond, v.P99)
		require.InDelta(t, 200, v.Offered, 0.5)
		require.True(t, v.Done)
	})
}

// TestProducerStopsWithCtx: without a window the producer sends until
// ctx ends, then returns, its lanes' sends ended.
func TestProducerStopsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var sent int
		var mu sync.Mutex
		rec := newSendEffects()
		p := &producer{rate: 100, lanes: 2, lane: func(i int) int { return i }, rec: rec,
			send: func(ctx context.Context, i int) (string, error) {
				mu.Lock()
				sent++
				mu.Unlock()
				return fmt.Sprint(i), hold(ctx, 15*time.Millisecond)
			}}
		done := make(chan struct{})
		go func() { defer close(done); p.run(ctx) }()
		time.Sleep(2505 * time.Millisecond)
		require.False(t, rec.read().Done)
		cancel()
		<-done
		require.Equal(t, 251, sent, "0 to 2.5 s at 100 msg/s")
		require.Equal(t, 250, rec.read().Sent, "every message after a warm-up of 0 is the window's; the last one's send was cut")
		require.True(t, rec.read().Done)
	})
}

// TestPacedConsumerOnTheFakes: -pace's producer on the fakes, spread over
// two queues, and the hand-written consumer through timedLedger: every
// window message is measured, no sooner than the held send's trip and
// the receive's answer allow, in virtual time.
func TestPacedConsumerOnTheFakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := consumeOpts{groups: 10, queues: 2, size: 300, scale: 1, jitter: 0.2, seed: 1, pace: 50, paceWarmup: time.Second, paceWindow: 2 * time.Second}
		reg := prometheus.NewRegistry()
		sq, db, err := o.fakes(ctx, reg, nil)
		require.NoError(t, err)
		sends := newSendEffects()
		h := newHandwritten(sq, db, o.queueURLs, o.ledger, reg)
		h.ledger = &timedLedger{Ledger: h.ledger.(*builtin.Ledger), waits: newGroupWaits(reg), sends: sends}
		done := make(chan error)
		go func() { done <- h.run(ctx, 4) }()
		p := o.pacedProducer(sends, func(err error) { t.Errorf("send: %v", err) })
		p.run(ctx)
		for gathered(t, reg, "exactly_effects_applied_total") < 150 { // warm-up and window
			time.Sleep(10 * time.Millisecond)
		}
		v := sends.read()
		require.Equal(t, 100, v.Sent)
		require.Equal(t, 100, v.Measured)
		// At least the send's trip (half of 15 ms, less 20 %) and the
		// receive's answer's; at most a few of the loops' batches.
		t.Logf("p50 %s, p99 %s", v.P50, v.P99)
		require.GreaterOrEqual(t, v.P50, 12*time.Millisecond)
		require.Less(t, v.P50, v.P99+time.Nanosecond)
		require.LessOrEqual(t, v.P99, 200*time.Millisecond)
		require.InDelta(t, 50, v.Offered, 0.5)
		cancel()
		require.NoError(t, <-done)
		time.Sleep(21 * time.Second)
	})
}

// TestSweepPacedPoint runs a point's paced runs through `bench consume
// -pace` processes (this test binary, as TestMain lets it): each consumer
// at half the slower drain, its window's messages every one measured.
func TestSweepPacedPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two `bench consume` processes for a few seconds each")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	var log strings.Builder
	h := &harness{cfg: Config{Warmup: 500 * time.Millisecond, Window: time.Second, SweepConc: 4, LatencyScale: 1, Jitter: 0.2, Seed: 1}, log: &log, self: self}
	p := SweepPoint{Dim: SweepGroups, Label: "10", Groups: 10}
	s := &Sweep{Runs: []SweepRun{
		{Point: p, Consumer: "baseline", Drain: Drain{Rate: 120}},
		{Point: p, Consumer: "worker", Drain: Drain{Rate: 400}},
	}}
	require.NoError(t, h.sweepPacedPoint(t.Context(), s, p), log.String())
	require.Empty(t, s.Failures, log.String())
	for _, r := range s.Runs {
		require.NotNil(t, r.Paced, r.Consumer)
		pr := *r.Paced
		require.Equal(t, 60.0, pr.Rate, "half the slower drain")
		require.Equal(t, 60, pr.Messages, "the window's second at 60 msg/s")
		require.Positive(t, pr.P50)
		require.GreaterOrEqual(t, pr.P99, pr.P50)
		require.NotEmpty(t, pr.Load)
	}
}

// TestSweepPacedPointSkips: without both drains, or with one that applied
// nothing, a point's paced runs are recorded as not measured.
func TestSweepPacedPointSkips(t *testing.T) {
	t.Parallel()
	h := &harness{log: io.Discard}
	p := SweepPoint{Dim: SweepEffect, Label: "10s", EffectDelay: 10 * time.Second}
	s := &Sweep{Runs: []SweepRun{{Point: p, Consumer: "worker", Drain: Drain{Rate: 1.5}}}}
	require.NoError(t, h.sweepPacedPoint(t.Context(), s, p))
	require.Equal(t, []SweepFailure{{Point: p, Text: "effect=10s send → effect not measured: hand-written's drain did not run"}}, s.Failures)
	require.Nil(t, s.Runs[0].Paced)
	q := SweepPoint{Dim: SweepLambda, Label: "1", Batch: 1}
	s = &Sweep{Runs: []SweepRun{{Point: q, Consumer: ConsumerLambdaHandwritten, Drain: Drain{Rate: 300}}, {Point: q, Consumer: ConsumerLambda}}}
	require.NoError(t, h.sweepPacedPoint(t.Context(), s, q))
	require.Equal(t, []SweepFailure{{Point: q, Text: "lambda=1 send → effect not measured: LambdaHandler (optimistic)'s drain applied nothing"}}, s.Failures)
}

// TestPacedDims: the default plan's paced points are its consumer
// points but the backlog's; the plan itself is as before.
func TestPacedDims(t *testing.T) {
	t.Parallel()
	ps, err := ParseSweep("default")
	require.NoError(t, err)
	count := map[string]int{}
	for _, p := range ps {
		if pacedDim(p.Dim) {
			count[p.Dim]++
		}
	}
	require.Equal(t, map[string]int{SweepGroups: 6, SweepSize: 4, SweepQueues: 3, SweepEffect: 3, SweepLambda: 5, SweepLambdaStandard: 2}, count)
	require.Len(t, ps, 36)
}

// TestConsumePaceFlags: -pace needs the aws regime's fakes and no
// negative figure; each error is one line naming the flags.
func TestConsumePaceFlags(t *testing.T) {
	t.Parallel()
	for _, args := range []string{"-pace 10", "-regime aws -pace -1", "-regime aws -pace 10 -pace-window -1s", "-regime aws -pace 10 -pace-warmup -1s"} {
		err := Consume(context.Background(), strings.Fields(args), io.Discard)
		require.ErrorContains(t, err, "-pace", args)
		require.ErrorContains(t, err, "a producer only in -regime aws", args)
		require.NotContains(t, err.Error(), "\n", args)
	}
}

// TestPacedRateKeepsAGroupBelowItsLimit: a paced run goes at half the
// slower drain, but no faster than half of what its groups move one
// message at a time (a receive's answer, a commit and a delete's trip,
// 27 ms at the model); many groups, or a standard queue, leave the drain's
// half.
func TestPacedRateKeepsAGroupBelowItsLimit(t *testing.T) {
	t.Parallel()
	cycle := 0.0075 + 0.012 + 0.0075
	one := SweepPoint{Dim: SweepGroups, Label: "1", Groups: 1}
	require.InDelta(t, 0.5/cycle, pacedRate(one, 66, 1), 1e-9, "one group: half its one-at-a-time limit, not 33 msg/s")
	require.InDelta(t, 10*0.5/cycle, pacedRate(SweepPoint{Dim: SweepGroups, Label: "10", Groups: 10}, 650, 1), 1e-9)
	require.InDelta(t, 600.0, pacedRate(SweepPoint{Dim: SweepGroups, Label: "1000", Groups: 1000}, 1200, 1), 1e-9, "many groups: half the drain")
	require.InDelta(t, 0.5/(2*cycle), pacedRate(one, 66, 2), 1e-9, "the latency scale stretches the cycle")
	slow := SweepPoint{Dim: SweepEffect, Label: "100ms", EffectDelay: 100 * time.Millisecond}
	require.InDelta(t, 71.0, pacedRate(slow, 142, 1), 1e-9, "1024 groups carry more than a slow effect's drain")
	require.InDelta(t, 0.5*float64(DefaultFakeGroups)/(cycle+0.1), pacedRate(slow, 1e6, 1), 1e-9, "the effect's wait is part of a group's cycle")
	require.InDelta(t, 1000.0, pacedRate(SweepPoint{Dim: SweepLambdaStandard, Label: "1", Batch: 1, Groups: 1}, 2000, 1), 1e-9, "a standard queue has no groups")
}
