package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

func TestParseSweepDefault(t *testing.T) {
	t.Parallel()
	ps, err := ParseSweep("default")
	require.NoError(t, err)
	count := map[string]int{}
	for _, p := range ps {
		count[p.Dim]++
	}
	require.Equal(t, map[string]int{SweepGroups: 6, SweepSize: 4, SweepQueues: 3, SweepBacklog: 3, SweepEffect: 3, SweepRelay: 6, SweepRelayWriters: 4, SweepLambda: 5, SweepLambdaStandard: 2}, count)
	require.Equal(t, SweepPoint{Dim: SweepGroups, Label: "1", Groups: 1}, ps[0])
	require.Equal(t, SweepPoint{Dim: SweepLambdaStandard, Label: "10", Batch: 10}, ps[len(ps)-1])
}

func TestParseSweepValues(t *testing.T) {
	t.Parallel()
	// Dimensions run in sweepDims order whatever order they are given in.
	ps, err := ParseSweep(" effect=10s ; size=100,10KiB,1MiB;backlog=20000")
	require.NoError(t, err)
	require.Equal(t, []SweepPoint{
		{Dim: SweepSize, Label: "100", Size: 100},
		{Dim: SweepSize, Label: "10KiB", Size: 10 << 10},
		{Dim: SweepSize, Label: "1MiB", Size: 1 << 20},
		{Dim: SweepBacklog, Label: "20000", Backlog: 20000},
		{Dim: SweepEffect, Label: "10s", EffectDelay: 10 * time.Second},
	}, ps)
	require.Equal(t, 10.0, ps[4].X())
	require.Equal(t, float64(10<<10), ps[1].X())
}

func TestParseSweepLambda(t *testing.T) {
	t.Parallel()
	ps, err := ParseSweep("lambda-standard=10;lambda=1, 10+500ms")
	require.NoError(t, err)
	require.Equal(t, []SweepPoint{
		{Dim: SweepLambda, Label: "1", Batch: 1},
		{Dim: SweepLambda, Label: "10+500ms", Batch: 10, BatchWindow: 500 * time.Millisecond},
		{Dim: SweepLambdaStandard, Label: "10", Batch: 10},
	}, ps)
	require.Equal(t, 10.0, ps[1].X(), "the batch size on the axis")
	for spec, want := range map[string]string{
		"lambda=0":            "-sweep lambda=0: want a batch size from 1 to 10",
		"lambda=11":           "-sweep lambda=11: want a batch size from 1 to 10",
		"lambda=ten":          "want a batch size from 1 to 10",
		"lambda=10+x":         `-sweep lambda=10+x: batching window "x": want a duration above 0`,
		"lambda=10+0s":        "batching window",
		"lambda=10+6m":        "up to 5m0s",
		"lambda-standard=+1s": "want a batch size",
	} {
		_, err := ParseSweep(spec)
		require.ErrorContains(t, err, want, spec)
	}
}

func TestParseSweepErrors(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"":                    "no points",
		"colours=1":           "dim one of groups, size",
		"groups=0":            "positive integer",
		"groups=1;groups=2":   "groups given twice",
		"size=2MiB":           "over SQS's maximum message size",
		"size=big":            "a size such as",
		"effect=fast":         "positive duration",
		"queues":              "want dim=v1,v2",
		"relay=1,x":           "relay=x",
		"backlog=10000,-1000": "positive integer",
	} {
		_, err := ParseSweep(spec)
		require.ErrorContains(t, err, want, spec)
	}
}

func TestModelRate(t *testing.T) {
	t.Parallel()
	// One group: a batch of 10 takes a receive, 10 transactions in
	// order and a delete: 10 / (15 + 10×12 + 15 ms).
	one := SweepPoint{Dim: SweepGroups, Groups: 1}
	require.InDelta(t, 10/0.150, ModelRate(one, "worker", 16, 1), 1e-9)
	require.InDelta(t, 10/0.150, ModelRate(one, "baseline", 16, 1), 1e-9)
	// Many groups: the worker's 16 transactions in flight, the
	// hand-written consumer's 16 loops of a batch each.
	many := SweepPoint{Dim: SweepGroups, Groups: 1000}
	require.InDelta(t, 16/0.012, ModelRate(many, "worker", 16, 1), 1e-6)
	require.InDelta(t, 16*10/0.150, ModelRate(many, "baseline", 16, 1), 1e-6)
	// Today's groups by default; an effect's wait adds to each message;
	// the scale stretches every call.
	slow := SweepPoint{Dim: SweepEffect, EffectDelay: 100 * time.Millisecond}
	require.InDelta(t, 16/0.112, ModelRate(slow, "worker", 16, 1), 1e-6)
	require.InDelta(t, 16/0.024, ModelRate(many, "worker", 16, 2), 1e-6)
}

func TestSweepPrefill(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30000, sweepPrefill(SweepPoint{Backlog: 30000}, 16, 1, 4), "a backlog point is its own")
	// 1333 msg/s × 4 s × 1.5.
	require.Equal(t, 8000, sweepPrefill(SweepPoint{}, 16, 1, 4))
	require.Equal(t, 100000, sweepPrefill(SweepPoint{Groups: 100000}, 16, 1, 4), "every group has a message")
	require.Equal(t, 500, sweepPrefill(SweepPoint{Groups: 1}, 16, 1, 4), "at least 500")
	require.Equal(t, SweepBytes>>20, sweepPrefill(SweepPoint{Size: 1 << 20}, 16, 1, 4), "within SweepBytes")
}

func TestWorkSizeAndBatches(t *testing.T) {
	t.Parallel()
	w := Workload(25, 3)
	w.Size = 300 << 10
	bs := w.Batches()
	n := 0
	for _, b := range bs {
		bytes := 0
		for i, e := range b {
			require.Len(t, aws.ToString(e.MessageBody), 300<<10)
			require.Equal(t, strings.TrimSpace(aws.ToString(e.Id)), aws.ToString(e.Id))
			require.Equal(t, i, atoi(t, aws.ToString(e.Id)))
			bytes += len(aws.ToString(e.MessageBody))
		}
		require.LessOrEqual(t, bytes, maxBatchBytes)
		n += len(b)
	}
	require.Equal(t, 25, n)
	require.Len(t, bs, 9, "three bodies of 300 KiB a batch")
	e, err := builtin.ParseLedgerEntry(aws.ToString(bs[0][0].MessageBody))
	require.NoError(t, err, "the pad is a field the ledger ignores")
	require.Equal(t, "g0", e.Account)
	// Small bodies stay unpadded, ten a batch.
	w = Workload(25, 3)
	w.Size = 10
	require.Len(t, w.Batches(), 3)
	require.NotContains(t, aws.ToString(w.Entry(0).MessageBody), "pad")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', s)
		n = 10*n + int(c-'0')
	}
	return n
}

// TestHandwrittenQueues drains three queues with two loops: each loop
// moves on a queue a batch, so no queue is left to wait.
func TestHandwrittenQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := consumeOpts{prefill: 90, groups: 90, queues: 3, size: 2000, scale: 1, jitter: 0.2, seed: 1}
		reg := prometheus.NewRegistry()
		sq, db, err := o.fakes(ctx, reg, nil)
		require.NoError(t, err)
		require.Len(t, o.queueURLs, 3)
		h := newHandwritten(sq, db, o.queueURLs, o.ledger, reg)
		done := make(chan error)
		go func() { done <- h.run(ctx, 2) }()
		for gathered(t, reg, "exactly_effects_applied_total") < 90 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		require.NoError(t, <-done)
		time.Sleep(21 * time.Second)
	})
}

// TestTimedLedgerDelay holds an effect for its delay before its writes.
func TestTimedLedgerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		l := &timedLedger{Ledger: &builtin.Ledger{Table: "l"}, waits: newGroupWaits(reg), delay: 100 * time.Millisecond}
		e := Workload(1, 1).Entry(0)
		in := effect.Input{Message: effect.Message{ID: "m1", Group: "g0", Body: aws.ToString(e.MessageBody), DedupID: "d1"}, Key: "d1"}
		start := time.Now()
		out, err := l.Apply(context.Background(), in)
		require.NoError(t, err)
		require.NotEmpty(t, out.Writes)
		require.Equal(t, 100*time.Millisecond, time.Since(start))
	})
}

func testSweep() *Sweep {
	drain := func(kind string, rate, cpuSec, rss float64) Drain {
		d := Drain{Regime: RegimeAWS, Consumer: kind, Procs: 1, Conc: 16, Seconds: 2, Rate: rate, Prefill: 8000, Window: newSample(time.Unix(10, 0))}
		d.Window.Counts["applied"] = 2 * rate
		d.Window.Counts["cpu_seconds"] = cpuSec
		d.Window.Counts[peakRSS] = rss * (1 << 20)
		d.Window.Requests["SQS.ReceiveMessage"] = 0.1 * 2 * rate
		return d
	}
	p1 := SweepPoint{Dim: SweepGroups, Label: "1", Groups: 1}
	p2 := SweepPoint{Dim: SweepGroups, Label: "1000", Groups: 1000}
	r := SweepPoint{Dim: SweepRelay, Label: "1", RelayGroups: 1}
	relay := func(rate float64) *RelayRun {
		x := &RelayRun{Seconds: 2, Rate: rate, Written: 2 * rate, Window: newSample(time.Unix(10, 0))}
		x.Window.Counts["applied"] = 2 * rate
		return x
	}
	return &Sweep{Conc: 16, LoadBefore: "3.00 2.00 1.00 1/100 5", LoadAfter: "4.00 2.00 1.00 1/100 6", LatencyScale: 1, Warmup: time.Second, Window: 3 * time.Second, Command: "make bench-sweep",
		Runs: []SweepRun{
			{Point: p1, Consumer: "baseline", Drain: drain("baseline", 60, 0.06, 20), Model: 66.7, Load: "3.00 2.00 1.00"},
			{Point: p1, Consumer: "worker", Drain: drain("worker", 63, 0.0756, 24), Model: 66.7, Load: "3.10 2.00 1.00"},
			{Point: p2, Consumer: "baseline", Drain: drain("baseline", 1000, 0.4, 40), Model: 1067, Load: "3.20 2.00 1.00"},
			{Point: p2, Consumer: "worker", Drain: drain("worker", 1200, 0.6, 50), Model: 1333, Load: "3.30 2.00 1.00"},
			{Point: r, Consumer: RelayDirect, Relay: relay(600), Load: "3.40"},
			{Point: r, Consumer: RelayOutbox, Relay: relay(48), Load: "3.40"},
			{Point: r, Consumer: RelayGroupBatch, Relay: relay(360), Load: "3.40"},
		}}
}

func TestSweepSentenceAndTable(t *testing.T) {
	t.Parallel()
	s := testSweep()
	require.Equal(t, []string{SweepGroups, SweepRelay}, s.dims())
	require.Equal(t, "From 1 to 1000 groups the worker runs at 0.90 to 0.94× the model's rate and 1.05 to 1.20× the hand-written consumer's, with 1.20 to 1.25× its CPU per message.", s.Sentence(SweepGroups))
	require.Equal(t, "From 1 to 1 groups the outbox with the relay's defaults delivers 0.08 to 0.08× what a direct producer sends in the same run, with GroupBatch 0.60 to 0.60×.", s.Sentence(SweepRelay))
	tb := s.table(SweepGroups)
	require.Len(t, tb.rows, 4)
	require.Equal(t, []string{"1000", "3.30", "worker (optimistic)", "1200", "1.20", "1333", "0.90", "250", "1.25", "50", "+10", "0.100", "0.0", "0.0 ms", "-", "-", "-", "8000"}, tb.rows[3], "no paced run: dashes")
	require.Equal(t, "3.00", tb.rows[0][1], "the load beside every figure")
	var b strings.Builder
	sweepMarkdown(&b, s)
	md := b.String()
	for _, want := range []string{"## Curves: cost as work grows", "### Message groups", "![message groups](bench-sweep-groups.svg)", "| 1000 | 3.30 | worker (optimistic) |", "at most 180 messages at concurrency 16", "`make bench-sweep`"} {
		require.Contains(t, md, want)
	}
	require.Less(t, strings.Index(md, "| 1000 | 3.30 | worker (optimistic) |"), strings.Index(md, "![message groups]"), "the table leads")
	require.Less(t, strings.Index(md, "![message groups]"), strings.Index(md, "From 1 to 1000 groups"), "then the chart, then the sentence")
	require.Contains(t, md, "CPU per message. "+sweepWhy[SweepGroups], "the sentence and the mechanism in one paragraph")
}

func TestSweepChartsAreSVG(t *testing.T) {
	t.Parallel()
	charts := SweepCharts(testSweep())
	require.Len(t, charts, 2)
	for dim, svg := range charts {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if err != nil {
				require.ErrorContains(t, err, "EOF", dim)
				break
			}
		}
		want := 2*3 + 3 // three panels of two consumers, the rate's with the model
		if dim == SweepRelay {
			want = 4 * 3 // four panels of three producers
		}
		require.Equal(t, want, strings.Count(svg, "<polyline"), dim)
	}
	require.Contains(t, charts[SweepGroups], "worker&#39;s model")
	require.Contains(t, charts[SweepGroups], "load 3.00 → 3.30", "as the dimension's runs started")
	require.Contains(t, charts[SweepRelay], "load 3.40 → 3.40")
	require.Contains(t, charts[SweepRelay], "GroupBatch")
	require.Empty(t, SweepCharts(nil))
}

func TestSweepMerge(t *testing.T) {
	t.Parallel()
	first := testSweep()
	first.Command, first.Commit = "make bench-sweep", "abc"
	big := SweepPoint{Dim: SweepSize, Label: "1MiB", Size: 1 << 20}
	huge := SweepPoint{Dim: SweepBacklog, Label: "1000000", Backlog: 1000000}
	first.failed(big, "worker: did not serve")
	first.failed(huge, "worker: did not serve")
	later := &Sweep{Command: "make bench-sweep BENCH_SWEEP='size=1MiB'", Commit: "abc", LoadAfter: "9.00",
		Failures: []SweepFailure{{Point: huge, Text: "backlog=1000000 worker: did not serve within 4m20s"}},
		Runs: []SweepRun{
			{Point: big, Consumer: "worker", Drain: Drain{Rate: 100}},
			{Point: SweepPoint{Dim: SweepGroups, Label: "1", Groups: 1}, Consumer: "worker", Drain: Drain{Rate: 70}},
		}}
	m := first.Merge(later)
	require.Equal(t, later.Failures, m.Failures, "a point measured or failed since has only its later word")
	require.Equal(t, []string{SweepGroups, SweepSize, SweepRelay}, m.dims())
	w, ok := m.run(SweepGroups, "1", "worker")
	require.True(t, ok)
	require.Equal(t, 70.0, w.Drain.Rate, "the later run replaces the earlier")
	require.Len(t, m.Runs, len(first.Runs)+1)
	require.Equal(t, "make bench-sweep; then make bench-sweep BENCH_SWEEP='size=1MiB'", m.Command)
	require.Equal(t, "abc", m.Commit)
	require.Equal(t, "9.00", m.LoadAfter)
	w0, _ := first.run(SweepGroups, "1", "worker")
	require.Equal(t, 63.0, w0.Drain.Rate, "the first sweep is left as it was")
	require.Equal(t, later.Runs, (*Sweep)(nil).Merge(later).Runs)

	// A failure is its point's, however the point was written: a later
	// run of "100B" clears the failure of "100".
	hundred := SweepPoint{Dim: SweepSize, Label: "100", Size: 100}
	failedFirst := &Sweep{}
	failedFirst.failed(hundred, "worker: did not serve")
	cleared := failedFirst.Merge(&Sweep{Runs: []SweepRun{{Point: SweepPoint{Dim: SweepSize, Label: "100B", Size: 100}, Consumer: "worker", Drain: Drain{Rate: 1}}}})
	require.Empty(t, cleared.Failures, "a point measured since, written another way, keeps no failure")
	require.Len(t, failedFirst.Merge(&Sweep{Runs: []SweepRun{{Point: SweepPoint{Dim: SweepSize, Label: "10KiB", Size: 10 << 10}, Consumer: "worker"}}}).Failures, 1,
		"another point's run leaves the failure")
	// A failure from results written before failures had their point is
	// its text's first word.
	var legacy Sweep
	require.NoError(t, json.Unmarshal([]byte(`{"Failures": ["size=100 worker: did not serve"]}`), &legacy))
	require.Equal(t, []SweepFailure{{Text: "size=100 worker: did not serve"}}, legacy.Failures)
	require.Empty(t, legacy.Merge(&Sweep{Runs: []SweepRun{{Point: hundred, Consumer: "worker"}}}).Failures)

	// One point written two ways is one point: the later replaces it.
	small := &Sweep{Runs: []SweepRun{{Point: SweepPoint{Dim: SweepSize, Label: "100", Size: 100}, Consumer: "worker", Drain: Drain{Rate: 1}}}}
	again := &Sweep{Runs: []SweepRun{{Point: SweepPoint{Dim: SweepSize, Label: "100B", Size: 100}, Consumer: "worker", Drain: Drain{Rate: 2}}}}
	require.Equal(t, again.Runs, small.Merge(again).Runs)
}

func TestSweepSentenceLeavesOutEmptyPoints(t *testing.T) {
	t.Parallel()
	s := testSweep()
	huge := SweepPoint{Dim: SweepGroups, Label: "100000", Groups: 100000}
	s.Runs = append(s.Runs,
		SweepRun{Point: huge, Consumer: "baseline", Model: 1067},
		SweepRun{Point: huge, Consumer: "worker", Model: 1333})
	line := s.Sentence(SweepGroups)
	require.Contains(t, line, "From 1 to 1000 groups the worker runs at 0.90 to 0.94× the model's rate and 1.05 to 1.20×")
	require.Contains(t, line, "At 100000 groups it applied nothing in its window.")
}

// TestSweepLambdaRenders: a Lambda dimension's rows are the hand-written
// handler and the LambdaHandler, the second against the first; its
// sentence and chart name them; a window point sorts after its batch.
func TestSweepLambdaRenders(t *testing.T) {
	t.Parallel()
	drain := func(kind string, rate float64) Drain {
		d := Drain{Regime: RegimeAWS, Consumer: kind, Procs: 1, Conc: 16, Seconds: 2, Rate: rate, Prefill: 8000, Window: newSample(time.Unix(10, 0))}
		d.Window.Counts["applied"] = 2 * rate
		d.Window.Counts["cpu_seconds"] = rate * 2 * 100e-6
		d.Window.Counts[peakRSS] = 30 << 20
		return d
	}
	p1 := SweepPoint{Dim: SweepLambda, Label: "1", Batch: 1}
	p10 := SweepPoint{Dim: SweepLambda, Label: "10", Batch: 10}
	pw := SweepPoint{Dim: SweepLambda, Label: "10+500ms", Batch: 10, BatchWindow: 500 * time.Millisecond}
	s := &Sweep{Conc: 16, LoadBefore: "5.00", LoadAfter: "6.00", LatencyScale: 1, Runs: []SweepRun{
		{Point: p1, Consumer: ConsumerLambdaHandwritten, Drain: drain(ConsumerLambdaHandwritten, 400), Model: 380, Load: "5.00"},
		{Point: p1, Consumer: ConsumerLambda, Drain: drain(ConsumerLambda, 300), Model: 380, Load: "5.10"},
	}}
	s = s.Merge(&Sweep{Runs: []SweepRun{
		{Point: pw, Consumer: ConsumerLambda, Drain: drain(ConsumerLambda, 1100), Model: 1270},
		{Point: p10, Consumer: ConsumerLambda, Drain: drain(ConsumerLambda, 1000), Model: 1270},
		{Point: p10, Consumer: ConsumerLambdaHandwritten, Drain: drain(ConsumerLambdaHandwritten, 1000), Model: 1067},
	}})
	require.Equal(t, []string{"1", "10", "10+500ms"}, func() []string {
		var out []string
		for _, p := range s.points(SweepLambda) {
			out = append(out, p.Label)
		}
		return out
	}(), "a window point after its batch")
	tb := s.table(SweepLambda)
	require.Equal(t, "batch (+ window)", tb.head[0])
	require.Equal(t, []string{"1", "5.00", "hand-written handler", "400", "-"}, tb.rows[0][:5])
	require.Equal(t, []string{"1", "5.10", "LambdaHandler (optimistic)", "300", "0.75"}, tb.rows[1][:5])
	require.Equal(t, []string{"10+500ms", "-", "LambdaHandler (optimistic)", "1100", "-"}, tb.rows[4][:5], "no hand-written run at that point")
	require.True(t, strings.HasPrefix(s.Sentence(SweepLambda), "From 1 to 10+500ms messages a batch the LambdaHandler runs at 0.79 to 0.87× the model's rate and 0.75 to 1.00× the hand-written handler's, "), s.Sentence(SweepLambda))
	svg := SweepCharts(s)[SweepLambda]
	require.Contains(t, svg, "LambdaHandler&#39;s model")
	require.Contains(t, svg, "hand-written handler")
}

// TestSweepRendersLatency: paced runs fill the send → effect columns, add
// a clause to the sentence, a panel to the chart and a sentence to the
// section's introduction saying what they measure.
func TestSweepRendersLatency(t *testing.T) {
	t.Parallel()
	s := testSweep()
	paced := map[string]*SweepPaced{
		"1/baseline":    {Rate: 30, Messages: 90, P50: 40 * time.Millisecond, P99: 120 * time.Millisecond},
		"1/worker":      {Rate: 30, Messages: 90, P50: 30 * time.Millisecond, P99: 60 * time.Millisecond},
		"1000/baseline": {Rate: 500, Messages: 1500, P50: 20 * time.Millisecond, P99: 40 * time.Millisecond},
		"1000/worker":   {Rate: 500, Messages: 1500, P50: 25 * time.Millisecond, P99: 30 * time.Millisecond},
	}
	for i, r := range s.Runs {
		s.Runs[i].Paced = paced[r.Point.Label+"/"+r.Consumer]
	}
	tb := s.table(SweepGroups)
	require.Equal(t, []string{"receive → effect start", "paced msg/s", "send → effect p50", "p99", "prefill"}, tb.head[13:])
	require.Equal(t, []string{"30", "40.0 ms", "120.0 ms"}, tb.rows[0][14:17])
	require.Equal(t, []string{"500", "25.0 ms", "30.0 ms", "8000"}, tb.rows[3][14:])
	require.True(t, strings.HasSuffix(s.Sentence(SweepGroups), "its CPU per message. Its send → effect p99 is 30 to 60 ms, the hand-written consumer's 40 to 120."), s.Sentence(SweepGroups))
	var b strings.Builder
	sweepMarkdown(&b, s)
	require.Contains(t, b.String(), "send → effect is a second run paced at 50 % of the slower drain, or of what a group moves one message at a time")
	require.Contains(t, b.String(), "| 1000 | 3.30 | worker (optimistic) | 1200 | 1.20 | 1333 | 0.90 | 250 | 1.25 | 50 | +10 | 0.100 | 0.0 | 0.0 ms | 500 | 25.0 ms | 30.0 ms | 8000 |")
	charts := SweepCharts(s)
	require.Equal(t, 2*3+3+4, strings.Count(charts[SweepGroups], "<polyline"), "a fifth panel: p50 and p99 of both consumers")
	require.Contains(t, charts[SweepGroups], "send → effect, ms (paced at 50 %)")
	require.Contains(t, charts[SweepGroups], "worker p99 at 1000: 30")
	require.Equal(t, 4*3, strings.Count(charts[SweepRelay], "<polyline"), "the relay's chart as before")
}

// TestSweepOldJSONRenders: a sweep from before paced runs (no Paced on
// its runs) loads and renders with dashes, no latency panel and no word
// of paced runs; a run without one writes none.
func TestSweepOldJSONRenders(t *testing.T) {
	t.Parallel()
	const old = `{"Sweep": {"Started": "2026-12-02T03:17:44Z", "Ended": "2026-12-02T04:03:43Z", "LoadBefore": "18.29 19.71 12.91", "LoadAfter": "6.43 7.66 5.08",
		"Command": "make bench-sweep", "Commit": "a7eec63", "Conc": 16, "Warmup": 1000000000, "Window": 3000000000, "LatencyScale": 1,
		"Failures": ["effect=10s hand-written consumer not run"],
		"Runs": [
			{"Point": {"Dim": "groups", "Label": "1", "Groups": 1, "Size": 0, "Queues": 0, "Backlog": 0, "EffectDelay": 0, "RelayGroups": 0}, "Consumer": "baseline",
			 "Drain": {"Regime": "aws", "Consumer": "baseline", "Procs": 1, "Conc": 16, "Groups": 1, "Prefill": 500,
			  "Window": {"At": "2026-12-02T03:17:49Z", "Counts": {"applied": 200, "cpu_seconds": 0.2, "rss_peak_bytes": 25473024, "start_wait_seconds": 12, "start_waits": 197}, "Requests": {"SQS.ReceiveMessage": 20}},
			  "Seconds": 3.09, "Rate": 64.67}, "Model": 66.67, "Load": "18.29 19.71 12.91"},
			{"Point": {"Dim": "groups", "Label": "1", "Groups": 1}, "Consumer": "worker",
			 "Drain": {"Regime": "aws", "Consumer": "worker", "Procs": 1, "Conc": 16, "Groups": 1, "Prefill": 500,
			  "Window": {"At": "2026-12-02T03:17:59Z", "Counts": {"applied": 190, "cpu_seconds": 0.25, "rss_peak_bytes": 30473024}, "Requests": {"SQS.ReceiveMessage": 25}},
			  "Seconds": 3.0, "Rate": 63.3}, "Model": 66.67, "Load": "18.00 19.71 12.91"}
		]}}`
	var res Result
	require.NoError(t, json.Unmarshal([]byte(old), &res))
	s := res.Sweep
	require.NotNil(t, s)
	require.Nil(t, s.Runs[0].Paced)
	tb := s.table(SweepGroups)
	require.Equal(t, []string{"60.9 ms", "-", "-", "-", "500"}, tb.rows[0][13:])
	require.NotContains(t, s.Sentence(SweepGroups), "send → effect")
	var b strings.Builder
	sweepMarkdown(&b, s)
	require.NotContains(t, b.String(), "The send → effect columns")
	require.Contains(t, b.String(), "| 1 | 18.00 | worker (optimistic) | 63 | 0.98 |")
	require.Equal(t, 2*3+3, strings.Count(SweepCharts(s)[SweepGroups], "<polyline"))
	out, err := json.Marshal(s.Runs[0])
	require.NoError(t, err)
	require.NotContains(t, string(out), "Paced")
}

// TestRelayWritersDimension: relay-writers points parse to their producer
// count over RelayWritersGroups groups, run as relay points (no paced
// run), and render with their own first column and sentence.
func TestRelayWritersDimension(t *testing.T) {
	t.Parallel()
	ps, err := ParseSweep("relay-writers=1,64")
	require.NoError(t, err)
	require.Equal(t, []SweepPoint{
		{Dim: SweepRelayWriters, Label: "1", RelayGroups: RelayWritersGroups, RelayWriters: 1},
		{Dim: SweepRelayWriters, Label: "64", RelayGroups: RelayWritersGroups, RelayWriters: 64},
	}, ps)
	require.False(t, pacedDim(SweepRelayWriters))
	_, err = ParseSweep("relay-writers=0")
	require.ErrorContains(t, err, "positive integer")
	relay := func(rate float64) *RelayRun {
		x := &RelayRun{Seconds: 2, Rate: rate, Written: 2 * rate, Window: newSample(time.Unix(10, 0))}
		x.Window.Counts["applied"] = 2 * rate
		return x
	}
	s := &Sweep{Runs: []SweepRun{
		{Point: ps[0], Consumer: RelayDirect, Relay: relay(100), Load: "1.00"},
		{Point: ps[0], Consumer: RelayOutbox, Relay: relay(90), Load: "1.00"},
		{Point: ps[0], Consumer: RelayGroupBatch, Relay: relay(80), Load: "1.00"},
		{Point: ps[1], Consumer: RelayDirect, Relay: relay(1000), Load: "2.00"},
		{Point: ps[1], Consumer: RelayOutbox, Relay: relay(1200), Load: "2.00"},
		{Point: ps[1], Consumer: RelayGroupBatch, Relay: relay(1100), Load: "2.00"},
	}}
	require.Equal(t, "From 1 to 64 producers the outbox with the relay's defaults delivers 0.90 to 1.20× what a direct producer sends in the same run, with GroupBatch 0.80 to 1.10×.", s.Sentence(SweepRelayWriters))
	tb := s.table(SweepRelayWriters)
	require.Equal(t, "producers", tb.head[0])
	require.Len(t, tb.rows, 6)
	require.Equal(t, []string{"64", "2.00", "outbox.Write + Relay", "1200", "1.20"}, tb.rows[4][:5])
	require.Equal(t, []string{"-", "-"}, tb.rows[4][9:], "no write → SQS times: dashes")

	// With write → SQS times, the sentence and the table carry them.
	for i, p99 := range []time.Duration{23, 600, 0, 27, 1100, 900} {
		s.Runs[i].Relay.P50, s.Runs[i].Relay.P99 = p99*time.Millisecond/2, p99*time.Millisecond
	}
	require.Equal(t, "From 1 to 64 producers the outbox with the relay's defaults delivers 0.90 to 1.20× what a direct producer sends in the same run, with GroupBatch 0.80 to 1.10×. Write → SQS p99: 600 to 1100 ms (direct: 23 to 27).", s.Sentence(SweepRelayWriters))
	tb = s.table(SweepRelayWriters)
	require.Equal(t, []string{"write → SQS p50", "p99"}, tb.head[9:])
	require.Equal(t, []string{"550.0 ms", "1100.0 ms"}, tb.rows[4][9:])
	require.Equal(t, []string{"-", "-"}, tb.rows[2][9:])
	chart := SweepCharts(s)[SweepRelayWriters]
	require.Equal(t, 5*3, strings.Count(chart, "<polyline"), "a fifth panel: write → SQS p99 of the three producers")
	require.Contains(t, chart, "write → SQS p99, ms")
}
