package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP exactly_effects_applied_total Effects run and committed.
# TYPE exactly_effects_applied_total counter
exactly_effects_applied_total{queue="a.fifo"} 12
exactly_effects_applied_total{queue="b.fifo"} 3
exactly_messages_received_total{queue="a.fifo"} 20
exactly_aws_requests_total{operation="ReceiveMessage",service="SQS"} 7
exactly_aws_requests_total{operation="PutItem",service="DynamoDB"} 15
exactly_aws_requests_total{service="DynamoDB",operation="PutItem"} 1
exactly_batch_entries_failed_total{op="delete",queue="q \"x\", y"} 2
exactly_handler_duration_seconds_bucket{outcome="won",queue="a",le="+Inf"} 9
go_goroutines 31
process_start_time_seconds 1.7e+09
`
	at := time.Unix(100, 0)
	s, err := parseMetrics(strings.NewReader(text), at)
	require.NoError(t, err)
	require.Equal(t, at, s.At)
	require.Equal(t, map[string]float64{"applied": 15, "received": 20, "batch_failed": 2}, s.Counts)
	require.Equal(t, map[string]float64{"SQS.ReceiveMessage": 7, "DynamoDB.PutItem": 16}, s.Requests)

	_, err = parseMetrics(strings.NewReader("broken{queue=\"a\" 1\n"), at)
	require.Error(t, err)
	_, err = parseMetrics(strings.NewReader("name notanumber\n"), at)
	require.Error(t, err)
}

func TestSumAndDelta(t *testing.T) {
	t.Parallel()
	a := Sample{At: time.Unix(10, 0), Counts: map[string]float64{"applied": 10}, Requests: map[string]float64{"SQS.ReceiveMessage": 4}}
	b := Sample{At: time.Unix(12, 0), Counts: map[string]float64{"applied": 30}, Requests: map[string]float64{"SQS.ReceiveMessage": 6, "DynamoDB.PutItem": 2}}
	s := sum([]Sample{a, b})
	require.Equal(t, time.Unix(11, 0), s.At)
	require.Equal(t, 40.0, s.Counts["applied"])
	require.Equal(t, 10.0, s.Requests["SQS.ReceiveMessage"])
	d := delta(a, b)
	require.Equal(t, b.At, d.At)
	require.Equal(t, 20.0, d.Counts["applied"])
	require.Equal(t, map[string]float64{"SQS.ReceiveMessage": 2, "DynamoDB.PutItem": 2}, d.Requests)
	require.InDelta(t, 0.1, perMessage(d, "SQS"), 1e-9)
	require.InDelta(t, 0.2, perMessage(d, ""), 1e-9)
	require.Zero(t, perMessage(newSample(time.Time{}), "SQS"))
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	ps := Percentiles(ds, 0.5, 0.99, 1, 0)
	require.Equal(t, []time.Duration{50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, time.Millisecond}, ps)
	require.Equal(t, 100*time.Millisecond, ds[0], "the input is not sorted in place")
	require.Equal(t, []time.Duration{0}, Percentiles(nil, 0.5))
}

func TestWorkloadShardsKeepGroupOrder(t *testing.T) {
	t.Parallel()
	w := Work{N: 103, Groups: 7, Prefix: "p"}
	seen := map[string]bool{}
	for k := range 3 {
		lastSeq := map[string]int64{}
		for _, batch := range w.Shard(k, 3) {
			require.LessOrEqual(t, len(batch), 10)
			for i, e := range batch {
				require.Equal(t, strconv.Itoa(i), aws.ToString(e.Id))
				id := aws.ToString(e.MessageDeduplicationId)
				require.False(t, seen[id], "sent twice: %s", id)
				seen[id] = true
				var body struct {
					Account string `json:"account"`
					Seq     int64  `json:"seq"`
				}
				require.NoError(t, json.Unmarshal([]byte(aws.ToString(e.MessageBody)), &body))
				require.Equal(t, body.Account, aws.ToString(e.MessageGroupId))
				require.Equal(t, lastSeq[body.Account]+1, body.Seq, "group %s out of order", body.Account)
				lastSeq[body.Account] = body.Seq
			}
		}
	}
	require.Len(t, seen, w.N)
	n := 0
	for _, b := range Workload(25, 0).Batches() {
		n += len(b)
	}
	require.Equal(t, 25, n)
}

func TestParseGoBench(t *testing.T) {
	t.Parallel()
	out := `goos: linux
pkg: github.com/exactlyonce/exactly/tools/internal/bench
cpu: Intel(R) Xeon(R) Processor
BenchmarkPoolLedger/effect=ledger/concurrency=1-2   9669   123250 ns/op   8114 msgs/s   45.00 p50-us   18532 B/op   278 allocs/op
BenchmarkBroken-2   x   1 ns/op
PASS
load: 1.75 0.90 0.40 3/200 999
pkg: github.com/exactlyonce/exactly/internal/dedup
BenchmarkClaimComplete   500   2000 ns/op   12 allocs/op
ok  	github.com/exactlyonce/exactly/tools/internal/bench	14.892s
`
	bs := ParseGoBench(out)
	require.Len(t, bs, 2)
	require.Equal(t, "PoolLedger/effect=ledger/concurrency=1", bs[0].Name)
	require.Equal(t, "github.com/exactlyonce/exactly/tools/internal/bench", bs[0].Package)
	require.Equal(t, 9669, bs[0].N)
	require.Equal(t, 8114.0, bs[0].Values["msgs/s"])
	require.Equal(t, []string{"ns/op", "msgs/s", "p50-us", "B/op", "allocs/op"}, bs[0].Units)
	require.Equal(t, "ClaimComplete", bs[1].Name)
	require.Equal(t, "github.com/exactlyonce/exactly/internal/dedup", bs[1].Package)
	require.Empty(t, bs[0].Load, "no load line before the first package")
	require.Equal(t, "1.75", bs[1].Load, "the load line before a package is its load")
	var md strings.Builder
	goBenchMarkdown(&md, bs)
	require.Contains(t, md.String(), "| ClaimComplete | 12 | 2000 | 1.75 |", "the load is printed beside the figures")

	var text bytes.Buffer
	WriteGoBenchText(&text, bs)
	require.Contains(t, text.String(), "PoolLedger/effect=ledger/concurrency=1")
	require.Contains(t, text.String(), "8114")
}

func TestParseStackStatus(t *testing.T) {
	t.Parallel()
	out := "sqs      up   http://127.0.0.1:9324  fauxqs 2.4.1 (pid 28133, started by scripts/stack)\n" +
		"dynamodb up   http://127.0.0.1:8000  DynamoDB Local 3.3.1 (pid 28137, started by scripts/stack)\n"
	s, d := parseStackStatus(out, "?", "?")
	require.Equal(t, "fauxqs 2.4.1", s)
	require.Equal(t, "DynamoDB Local 3.3.1", d)
	s, d = parseStackStatus("sqs      down\n", "?", "?")
	require.Equal(t, "?", s)
	require.Equal(t, "?", d)
}

func TestIntList(t *testing.T) {
	t.Parallel()
	v, err := intList("1, 4,16,")
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 16}, v)
	for _, bad := range []string{"", "0", "a", "-1"} {
		_, err := intList(bad)
		require.Error(t, err, bad)
	}
}

func TestMainRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-procs", "0"}, {"-concurrency", "x"}, {"extra"}, {"-nope"}} {
		err := Main(t.Context(), args, io.Discard, io.Discard)
		require.Error(t, err, "%v", args)
	}
	require.ErrorIs(t, Main(t.Context(), []string{"-h"}, io.Discard, io.Discard), flag.ErrHelp)
	err := Main(t.Context(), []string{"-effect", "http"}, io.Discard, io.Discard)
	require.Error(t, err)
}

// sampleResult is a small result as Run returns it.
func sampleResult() *Result {
	cfg := Config{Procs: []int{1, 2}, Concurrency: []int{1, 16}, Commit: "transactional"}
	if err := cfg.defaults(); err != nil {
		panic(err)
	}
	start := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	lim := Limits{At: start, SQS: 2000, Put: 600, Path: 200, WritesPerMessage: 2}
	lim2 := lim
	lim2.At, lim2.Put = start.Add(5*time.Minute), 500
	// win is a window of applied messages with requests per message.
	win := func(applied, recv, del, put, tx float64) Sample {
		return Sample{Counts: map[string]float64{"applied": applied, "received": applied, "dynamodb_wru": 6 * applied}, Requests: map[string]float64{
			"SQS.ReceiveMessage": recv * applied, "SQS.DeleteMessageBatch": del * applied, "DynamoDB.PutItem": put * applied, "DynamoDB.TransactWriteItems": tx * applied,
		}}
	}
	r := &Result{
		Config: cfg, Started: start, Ended: start.Add(5 * time.Minute), LoadBefore: "1.0 1.0 1.0", LoadAfter: "2.0 2.0 2.0",
		Machine: Machine{CPUs: 2, CPUModel: "Test CPU <x>", MemoryGB: 4, Kernel: "6.1", Go: "go1.26", SQS: "fauxqs 2.4.1", DynamoDB: "DynamoDB Local 3.3.1"},
		Limits:  []Limits{lim, lim2},
	}
	for _, c := range cfg.Concurrency {
		n := 100 * float64(c) * 8
		r.Runs = append(r.Runs, Drain{Consumer: "baseline", Procs: 1, Conc: c, Rate: n / 8, Seconds: 8,
			Window: Sample{Counts: map[string]float64{"applied": n, "dynamodb_wru": 4 * n}, Requests: map[string]float64{"SQS.ReceiveMessage": n, "SQS.DeleteMessage": n, "DynamoDB.TransactWriteItems": n}}})
		for _, p := range cfg.Procs {
			rate := 20 * float64(c*p)
			r.Runs = append(r.Runs, Drain{Consumer: "worker", Procs: p, Conc: c, Rate: rate, Seconds: 8, Window: win(rate*8, 0.9, 0.4, 1, 1)})
		}
	}
	for i := range r.Runs {
		r.Runs[i].Window.At = start.Add(time.Duration(i+1) * 10 * time.Second)
	}
	r.setShares()
	r.Latency = []Paced{{Consumer: "worker", Procs: 1, Conc: 16, Offered: 100, Messages: 1000, P50: 12 * time.Millisecond, P99: 80 * time.Millisecond, Max: 120 * time.Millisecond, Window: win(1000, 1, 1, 1, 1)}}
	return r
}

func TestReports(t *testing.T) {
	t.Parallel()
	r := sampleResult()
	require.InDelta(t, 275, r.Limit(), 1e-9)

	var text bytes.Buffer
	WriteText(&text, r)
	out := text.String()
	for _, want := range []string{"worker ×2", "baseline", "SQS.DeleteMessageBatch", "DynamoDB.TransactWriteItems", "p99", "80 ms", "set by DynamoDB"} {
		require.Contains(t, out, want)
	}

	fs := r.Findings()
	require.Len(t, fs, 5)
	require.Contains(t, fs[0], "The limit is set by DynamoDB: 550 conditional puts/s ÷ 2 writes a message = 275 msg/s (SQS: 2000)")
	require.Contains(t, fs[0], ", 250-300 over 2 measurements.")
	require.Contains(t, fs[1], "worker ×2 at concurrency 16, 640 msg/s = 220% of the limit and 303% of what its DynamoDB calls reach alone")
	require.Contains(t, fs[1], ": DynamoDB Local binds it, not SQS or the pool (a commit costs it about 1.5 puts).")
	require.Contains(t, fs[2], "It does 0.40× the best hand-written run (concurrency 16, 1600 msg/s)")

	// In optimistic mode (the worker's default), one write per message.
	o := sampleResult()
	o.Config.Commit = "optimistic"
	for i := range o.Limits {
		o.Limits[i].WritesPerMessage = 1
	}
	ofs := o.Findings()
	require.Contains(t, ofs[0], "÷ 1 write a message = 550 msg/s")
	require.Contains(t, fs[3], "2 processes 2.00×")
	require.Contains(t, fs[4], "1.300, above the 0.25 target (ReceiveMessage 0.900); 1.1 messages a receive, 2.5 a delete batch.")

	r.GoBench = ParseGoBench("pkg: p\nBenchmarkX-2 10 5 ns/op 3 allocs/op\n")
	r.Command = "make bench-report"
	md := Markdown(r)
	for _, want := range []string{"# Benchmarks", "`make bench-report`", "2 × Test CPU <x>", "fauxqs 2.4.1", "DynamoDB Local 3.3.1",
		"![throughput against concurrency, both regimes](bench-throughput.svg)", "| worker ×1 | 16 | 320 | 109% | 0.20 | 1.300 | 6.50 | 2.000 | 6.00 | - | - | - | 1.1 | 2.5 |", "## In memory", "| X | 3 | 5 | - |", "| worker ×1 | 16 | 100 | 1000 | 12 ms | 80 ms |"} {
		require.Contains(t, md, want)
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	t.Parallel()
	svg := Chart(sampleResult())
	dec := xml.NewDecoder(strings.NewReader(svg))
	polylines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	require.Equal(t, 3, polylines, "one line per process count and one for the hand-written consumer")
	require.Contains(t, svg, "Test CPU &lt;x&gt;")
	require.Contains(t, svg, "worker ×2")
	require.Contains(t, svg, "hand-written")
}

func TestDrainsMergeRounds(t *testing.T) {
	t.Parallel()
	r := &Result{Config: Config{Rounds: 2}}
	mk := func(round int, applied, secs float64) Drain {
		return Drain{Consumer: "worker", Procs: 1, Conc: 4, Round: round, Seconds: secs, Rate: applied / secs,
			Window: Sample{Counts: map[string]float64{"applied": applied}, Requests: map[string]float64{"SQS.ReceiveMessage": applied / 2}}}
	}
	r.Runs = []Drain{mk(1, 100, 10), {Consumer: "baseline", Procs: 1, Conc: 4, Rate: 5, Seconds: 2, Window: newSample(time.Time{})}, mk(2, 300, 10)}
	ds := r.Drains()
	require.Len(t, ds, 2)
	w := ds[0]
	require.Equal(t, 2, w.Rounds)
	require.InDelta(t, 20, w.Rate, 1e-9, "time-weighted mean")
	require.Equal(t, 10.0, w.MinRate)
	require.Equal(t, 30.0, w.MaxRate)
	require.InDelta(t, 0.5, w.PerMessage("SQS"), 1e-9)
	require.Equal(t, 100.0, r.Runs[0].Window.Counts["applied"], "merging leaves the runs alone")
	require.Equal(t, 1, ds[1].Rounds)

	var text bytes.Buffer
	r.Limits = []Limits{{SQS: 10, Put: 10, WritesPerMessage: 2}}
	WriteText(&text, r)
	require.Contains(t, text.String(), "10-30")
}

func TestLimitAtInterpolates(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	r := &Result{Limits: []Limits{
		{At: t0, SQS: 1000, Put: 200, WritesPerMessage: 2},
		{At: t0.Add(100 * time.Second), SQS: 1000, Put: 600, WritesPerMessage: 2},
	}}
	require.InDelta(t, 100, r.limitAt(t0.Add(-time.Hour)), 1e-9)
	require.InDelta(t, 150, r.limitAt(t0.Add(25*time.Second)), 1e-9)
	require.InDelta(t, 300, r.limitAt(t0.Add(time.Hour)), 1e-9)
	r.Runs = []Drain{{Seconds: 10, Window: Sample{At: t0.Add(30 * time.Second), Counts: map[string]float64{"applied": 1500}}}}
	r.setShares()
	require.InDelta(t, 150, r.Runs[0].Limit, 1e-9, "the middle of the window: 25s")
	require.InDelta(t, 1.0, r.Runs[0].Share(), 1e-9)
	require.Zero(t, Drain{}.Share())
}

func TestRenderFromJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := sampleResult()
	r.Command = "make bench-report"
	b, err := json.Marshal(r)
	require.NoError(t, err)
	in := dir + "/results.json"
	require.NoError(t, os.WriteFile(in, b, 0o644))
	var stdout bytes.Buffer
	report := dir + "/BENCHMARKS.md"
	require.NoError(t, Main(t.Context(), []string{"-render", in, "-report", report, "-json", dir + "/again.json"}, &stdout, io.Discard))
	require.Contains(t, stdout.String(), "worker ×2")
	md, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(md), "`make bench-report`")
	require.Contains(t, string(md), "| worker ×1 | 16 | 320 | 109% |")
	_, err = os.Stat(dir + "/" + ChartFile)
	require.NoError(t, err)
	again, err := os.ReadFile(dir + "/again.json")
	require.NoError(t, err)
	var back Result
	require.NoError(t, json.Unmarshal(again, &back))
	require.Equal(t, r.Drains(), back.Drains())
}

// TestBudget: the cost model's arithmetic on fixed counts: a worker at 1.3
// SQS requests and 6 write units per message against a baseline at 2 and
// 4, at the published prices.
func TestBudget(t *testing.T) {
	t.Parallel()
	r := sampleResult()
	w, ok := r.find("worker", 1, 16)
	require.True(t, ok)
	b, ok := w.Window.Budget()
	require.True(t, ok)
	require.InDelta(t, 1.3, b.SQSRequests, 1e-9)
	require.InDelta(t, 6, b.WriteUnits, 1e-9)
	sqs, db := b.PerMillion()
	require.InDelta(t, 0.65, sqs, 1e-9)
	require.InDelta(t, 3.75, db, 1e-9)

	var text bytes.Buffer
	r.budgetTable().text(&text)
	out := text.String()
	require.Contains(t, out, "4.400") // the worker's total per million
	require.Contains(t, out, "3.500") // the baseline's: 2 × 0.50 + 4 × 0.625
	require.Contains(t, out, "1.26")  // × baseline
	require.Contains(t, Markdown(r), "## The budget, as AWS bills it")
	chart := BudgetChart(r)
	require.Contains(t, chart, "$4.400")
	require.Contains(t, chart, "$3.500")
	// Another commit mode beside the default one: its own rows and line.
	r.Runs = append(r.Runs, Drain{Consumer: "worker/transactional", Procs: 1, Conc: 16, Rate: 100, Seconds: 8,
		Window: Sample{Counts: map[string]float64{"applied": 800, "dynamodb_wru": 7 * 800}, Requests: map[string]float64{"SQS.ReceiveMessage": 800}}})
	text.Reset()
	r.budgetTable().text(&text)
	require.Contains(t, text.String(), "worker ×1 (transactional)")
	require.Contains(t, text.String(), "7.00")
	require.Contains(t, Chart(r), "worker ×1 (transactional)")
	_, ok = Sample{Counts: map[string]float64{}}.Budget()
	require.False(t, ok, "no messages, no budget")
}

// TestGoBenchStarted: make bench's "started: " line dates the whole run.
func TestGoBenchStarted(t *testing.T) {
	t.Parallel()
	at := goBenchStarted("started: 2026-12-04T18:00:00Z\nload: 1.0 1.0 1.0 1/2 3\npkg: p\n")
	require.Equal(t, time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC), at)
	require.True(t, goBenchStarted("pkg: p\n").IsZero())
	r := sampleResult()
	r.GoBenchStarted = r.Started.Add(-2 * time.Minute)
	require.Contains(t, Markdown(r), "This run took 7m0s in all, the in-memory benchmarks first.")
	require.Contains(t, Markdown(sampleResult()), "The harness took 5m0s.")
}
