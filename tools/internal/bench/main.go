package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Main is cmd/bench: it parses args, runs the harness, prints the tables on
// stdout and, with -report, rewrites the Markdown report and its chart.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "consume" {
		return Consume(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	procs := fs.String("procs", "1", "worker process counts (emulator regime; the aws regime runs one)")
	conc := fs.String("concurrency", "2,16,64", "--concurrency of each worker process (and the hand-written consumer's receive loops)")
	regimes := fs.String("regimes", RegimeEmulator+","+RegimeAWS, "emulator (the emulators at their speed, through the SDK) and/or aws (the in-memory fakes held for AWS-like latency)")
	fs.Float64Var(&cfg.LatencyScale, "latency-scale", 1, "aws regime: the latency model's times this (docs/BENCHMARKS.md lists the model)")
	fs.Float64Var(&cfg.Jitter, "jitter", DefaultJitter, "aws regime: every held call varies uniformly within ± this fraction")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "aws regime: seed of the jitter")
	fs.IntVar(&cfg.FakeGroups, "fake-groups", DefaultFakeGroups, "aws regime: message groups of the pre-filled queue")
	fs.StringVar(&cfg.WorkerBin, "worker-bin", "", "worker binary (default: go build ./cmd/worker into a temporary directory)")
	fs.StringVar(&cfg.Effect, "effect", DefaultEffect, "effect of the worker and the baseline: ledger or noop")
	fs.StringVar(&cfg.Commit, "commit", DefaultCommit, "the worker's commit mode: optimistic (its default for ledger and noop: one DynamoDB write per message) or transactional (claim, then commit: two)")
	compare := fs.String("compare", "grouped,carried", "other commit modes run beside -commit, one worker process each, for the budget per mode: transactional, optimistic, grouped (optimistic with --group-commit 5ms), carried (the ledger's entry carries the dedup record); empty: none")
	fs.IntVar(&cfg.Groups, "groups", 0, "message groups of the saturated runs (0: one per message)")
	fs.DurationVar(&cfg.Warmup, "warmup", DefaultWarmup, "warm-up after the first effect of a saturated run")
	fs.DurationVar(&cfg.Window, "window", DefaultWindow, "measurement window of a saturated run")
	limitConc := fs.String("limit-concurrency", "16,64", "concurrencies of the raw limit measurements (the best counts)")
	fs.IntVar(&cfg.LimitMessages, "limit-messages", DefaultLimitMessages, "messages drained to measure the SQS limit")
	fs.DurationVar(&cfg.LimitDuration, "limit-duration", DefaultLimitDuration, "duration of each DynamoDB limit measurement")
	fs.DurationVar(&cfg.LatencyDuration, "latency-duration", DefaultLatencyDuration, "how long the paced producer of the latency runs sends")
	fs.Float64Var(&cfg.LatencyLoad, "latency-load", DefaultLatencyLoad, "offered load of the latency runs, as a share of the slower consumer's saturated rate")
	fs.BoolVar(&cfg.NoProfile, "no-profile", false, "skip the CPU profiles (the worker's in the emulator regime; the worker's and the hand-written consumer's saturated runs in the aws regime)")
	fs.BoolVar(&cfg.NoRelay, "no-relay", false, "skip the relay comparison (direct producer vs outbox + relay, aws regime)")
	fs.IntVar(&cfg.RelayWriters, "relay-writers", DefaultRelayWriters, "producer goroutines of the relay comparison")
	fs.IntVar(&cfg.RelayConcurrency, "relay-concurrency", 0, "the relay's Concurrency in the relay comparison and sweep (0: outbox.DefaultConcurrency)")
	fs.BoolVar(&cfg.NoLatency, "no-latency", false, "skip the latency runs")
	fs.BoolVar(&cfg.NoBaseline, "no-baseline", false, "skip the baseline consumer")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "repeat the saturated runs this many times (limits measured before each round); rates merge over rounds")
	fs.IntVar(&cfg.MaxPrefill, "max-prefill", DefaultMaxPrefill, "cap on the messages sent before a saturated run")
	quick := fs.Bool("quick", false, "a short run unless flags say otherwise: concurrency 2,16, 3s windows (a smoke test, not a measurement)")
	report := fs.String("report", "", "write the Markdown report to this file and its chart beside it (docs/BENCHMARKS.md)")
	inmem := fs.String("inmem", "", "output of `go test -bench` to include in the report")
	command := fs.String("command", "", "the command to record in the report (default: this one)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file (docs/bench-results.json)")
	render := fs.String("render", "", "do not measure: render the tables and the report from a -json file")
	sweep := fs.String("sweep", "", "curves, aws regime: \"default\" ("+DefaultSweep+") or dim=v1,v2;... over groups, size, queues, backlog, effect, relay, lambda (B or B+WINDOW: batch size 1 to 10, batching window), lambda-standard")
	fs.BoolVar(&cfg.SweepOnly, "sweep-only", false, "run the sweep and nothing else (no emulators needed)")
	fs.IntVar(&cfg.SweepConc, "sweep-concurrency", DefaultSweepConc, "concurrency of the sweep's consumers")
	fs.DurationVar(&cfg.SweepWarmup, "sweep-warmup", DefaultSweepWarmup, "warm-up of a sweep point (a slow effect gets at least its own duration)")
	fs.DurationVar(&cfg.SweepWindow, "sweep-window", DefaultSweepWindow, "window of a sweep point (a slow effect gets at least three times its duration)")
	sweepFrom := fs.String("sweep-from", "", "take the sweep from these -json files (-sweep-only runs, comma-separated; a later file's points replace an earlier one's) into the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if cfg.Procs, err = intList(*procs); err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	if cfg.Concurrency, err = intList(*conc); err != nil {
		return fmt.Errorf("-concurrency: %w", err)
	}
	if cfg.LimitConcurrency, err = intList(*limitConc); err != nil {
		return fmt.Errorf("-limit-concurrency: %w", err)
	}
	if *sweep != "" {
		if cfg.Sweep, err = ParseSweep(*sweep); err != nil {
			return err
		}
	}
	for _, g := range strings.Split(*regimes, ",") {
		if g = strings.TrimSpace(g); g != "" {
			cfg.Regimes = append(cfg.Regimes, g)
		}
	}
	for _, m := range strings.Split(*compare, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Compare = append(cfg.Compare, m)
		}
	}
	if *quick {
		// Flags given explicitly win over -quick.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickly := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		quickly("concurrency", func() { cfg.Concurrency = []int{2, 16} })
		quickly("warmup", func() { cfg.Warmup = time.Second })
		quickly("window", func() { cfg.Window = 3 * time.Second })
		quickly("limit-messages", func() { cfg.LimitMessages = 2000 })
		quickly("limit-concurrency", func() { cfg.LimitConcurrency = []int{16} })
		quickly("limit-duration", func() { cfg.LimitDuration = 2 * time.Second })
		quickly("latency-duration", func() { cfg.LatencyDuration = 3 * time.Second })
	}
	var res *Result
	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			return err
		}
		res = &Result{}
		if err := json.Unmarshal(b, res); err != nil {
			return fmt.Errorf("-render %s: %w", *render, err)
		}
	} else {
		cfg.Log = stderr
		if res, err = Run(ctx, cfg); err != nil {
			return err
		}
		res.Args = harnessArgs(args)
		res.Command = "cd tools && go run ./cmd/bench " + res.Args
	}
	if *command != "" {
		res.Command = *command
	}
	if res.Sweep != nil && res.Sweep.Command == "" {
		res.Sweep.Command = res.Command
	}
	if *sweepFrom != "" {
		res.Sweep = nil
		for _, file := range strings.Split(*sweepFrom, ",") {
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			var other Result
			if err := json.Unmarshal(b, &other); err != nil {
				return fmt.Errorf("-sweep-from %s: %w", file, err)
			}
			if other.Sweep == nil {
				return fmt.Errorf("-sweep-from %s: the file holds no sweep (run with -sweep)", file)
			}
			res.Sweep = res.Sweep.Merge(other.Sweep)
		}
	}
	if *inmem != "" {
		b, err := os.ReadFile(*inmem)
		if err != nil {
			return err
		}
		res.GoBench = ParseGoBench(string(b))
		if t := goBenchStarted(string(b)); !t.IsZero() && *render == "" {
			res.GoBenchStarted = t
		}
	}
	if len(res.GoBench) > 0 {
		fmt.Fprintln(stdout, "In memory (go test -bench):")
		WriteGoBenchText(stdout, res.GoBench)
		fmt.Fprintln(stdout)
	}
	WriteText(stdout, res)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *report == "" {
		return nil
	}
	svgPath := filepath.Join(filepath.Dir(*report), ChartFile)
	if err := os.WriteFile(svgPath, []byte(Chart(res)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(*report), BudgetChartFile), []byte(BudgetChart(res)), 0o644); err != nil {
		return err
	}
	for dim, svg := range SweepCharts(res.Sweep) {
		if err := os.WriteFile(filepath.Join(filepath.Dir(*report), SweepChartFile(dim)), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(*report, []byte(Markdown(res)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: wrote %s and %s\n", *report, svgPath)
	return nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// harnessArgs is args without the flags that name temporary files or the
// recorded command, for the report.
func harnessArgs(args []string) string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if k, _, ok := strings.Cut(name, "="); ok {
			if k == "inmem" || k == "command" {
				continue
			}
		} else if name == "inmem" || name == "command" {
			i++
			continue
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
