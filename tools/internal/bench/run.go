// Package bench measures the worker: in-memory Go benchmarks (bench_test.go)
// and a harness (cmd/bench) that runs the built worker against the local
// emulators and reports its throughput as a share of the limit the emulators
// set, measured in the same run, next to a baseline consumer measured in the
// same run. On a shared, noisy machine an absolute rate means little; the
// claims are the ratios.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Defaults of Config.
const (
	DefaultWarmup          = 1500 * time.Millisecond
	DefaultWindow          = 6 * time.Second
	DefaultLimitMessages   = 6000
	DefaultLimitDuration   = 4 * time.Second
	DefaultLatencyDuration = 6 * time.Second
	DefaultLatencyLoad     = 0.5
	DefaultMaxPrefill      = 20000
	DefaultEffect          = "ledger"
	// DefaultCommit is the worker's own default for the ledger and noop
	// effects (effect.WritesOnly): no claim, one transaction per message.
	DefaultCommit = "optimistic"
	// GroupCommitWindow is the --group-commit of the "grouped" mode.
	GroupCommitWindow = 5 * time.Millisecond
)

// StopTimeout bounds a consumer's exit after SIGTERM: a worker waits for
// its long polls under way (20 s on a queue whose only group is in flight)
// and then drains.
const StopTimeout = 60 * time.Second

// StartTimeout bounds a consumer's start until it serves /metrics; a
// `bench consume` of the aws regime fills its fake queue first and gets
// PrefillTime a message more.
const (
	StartTimeout = 60 * time.Second
	PrefillTime  = 200 * time.Microsecond
)

// MinPrefill is the fewest messages a saturated run at emulator speed
// starts with.
const MinPrefill = 2000

// DefaultConcurrency is the concurrencies of the saturated runs.
func DefaultConcurrency() []int { return []int{2, 16, 64} }

// DefaultFakeGroups is the message groups of the aws regime's queue: enough
// that no consumer waits on a group at concurrency 64; memsqs scans the
// groups on a FIFO receive, so not one per message.
const DefaultFakeGroups = 1024

// DefaultLimitConcurrency is where the limits are measured: DynamoDB Local
// shares its threads among its clients, so on a shared emulator a client
// with more connections gets more; the best of a few concurrencies is the
// most the emulators give.
func DefaultLimitConcurrency() []int { return []int{16, 64} }

// Config of a harness run. Zero values take the defaults above.
type Config struct {
	WorkerBin        string        // the worker binary; "" builds cmd/worker with the go tool
	Effect           string        // ledger or noop, for the worker and the baseline
	Commit           string        // the worker's --commit: optimistic (one write per message) or transactional (claim, then the commit)
	Compare          []string      // other commit modes run beside it, one worker process each: consumer "worker/<mode>"; "grouped" is optimistic with --group-commit 5ms
	Procs            []int         // worker process counts ({1, 2, 4})
	Concurrency      []int         // --concurrency of each process and baseline goroutines ({1, 4, 16, 32})
	Groups           int           // message groups of the saturated runs; 0: one per message
	Warmup           time.Duration // after the first effect, before the window opens
	Window           time.Duration // measurement window of a saturated run
	LimitConcurrency []int         // concurrencies of the raw limit measurements ({16, 64}); the best counts
	LimitMessages    int           // messages drained to measure the SQS limit
	LimitDuration    time.Duration // duration of each DynamoDB limit measurement
	LatencyDuration  time.Duration // how long the paced producer of the latency runs sends
	LatencyLoad      float64       // offered load of the latency runs, as a share of the slower consumer's saturated rate
	NoLatency        bool          // skip the latency runs
	NoBaseline       bool          // skip the baseline consumer
	MaxPrefill       int           // cap on the messages sent before a saturated run
	Rounds           int           // times the matrix of saturated runs is repeated (1); limits are measured before each and at the end
	Regimes          []string      // RegimeEmulator, RegimeAWS (both)
	LatencyScale     float64       // the aws regime's latency, times Latencies (1)
	Jitter           float64       // the aws regime's jitter (DefaultJitter)
	Seed             uint64        // the aws regime's jitter seed (1)
	FakeGroups       int           // message groups of the aws regime's queue (DefaultFakeGroups)
	SelfBin          string        // this harness's binary, for `bench consume` ("" = os.Executable)
	NoRelay          bool          // skip the relay comparison (aws regime)
	NoProfile        bool          // skip the CPU profiles (emulator regime: the worker's; aws regime: its saturated runs')
	RelayGroups      []int         // group counts of the relay comparison (DefaultRelayGroups)
	RelayWriters     int           // producer goroutines of the relay comparison (DefaultRelayWriters)
	RelayConcurrency int           // the relay's Concurrency (0: outbox.DefaultConcurrency)
	Sweep            []SweepPoint  // the sweep's points (ParseSweep), aws regime; none: no sweep
	SweepOnly        bool          // run the sweep and nothing else
	SweepConc        int           // concurrency of the sweep's consumers (DefaultSweepConc)
	SweepWarmup      time.Duration // a sweep point's warm-up (DefaultSweepWarmup)
	SweepWindow      time.Duration // a sweep point's window (DefaultSweepWindow)
	Log              io.Writer     `json:"-"` // progress lines; nil: discarded
}

func (c *Config) defaults() error {
	if c.Effect == "" {
		c.Effect = DefaultEffect
	}
	if c.Effect != "ledger" && c.Effect != "noop" {
		return fmt.Errorf("effect %q: want ledger or noop", c.Effect)
	}
	if c.Commit == "" {
		c.Commit = DefaultCommit
	}
	if c.Commit != "optimistic" && c.Commit != "transactional" {
		return fmt.Errorf("commit mode %q: want optimistic or transactional", c.Commit)
	}
	for _, m := range c.Compare {
		if m != "optimistic" && m != "transactional" && m != "grouped" && m != "carried" {
			return fmt.Errorf("compared mode %q: want optimistic, transactional, grouped or carried", m)
		}
	}
	c.Compare = slices.DeleteFunc(c.Compare, func(m string) bool { return m == c.Commit })
	if len(c.Procs) == 0 {
		c.Procs = []int{1}
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency()
	}
	if len(c.Regimes) == 0 {
		c.Regimes = []string{RegimeEmulator, RegimeAWS}
	}
	for _, g := range c.Regimes {
		if g != RegimeEmulator && g != RegimeAWS {
			return fmt.Errorf("regime %q: want emulator or aws", g)
		}
	}
	if c.LatencyScale <= 0 {
		c.LatencyScale = 1
	}
	if c.Jitter < 0 || c.Jitter >= 1 {
		return fmt.Errorf("jitter %v: want a fraction from 0 to below 1", c.Jitter)
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if len(c.RelayGroups) == 0 {
		c.RelayGroups = DefaultRelayGroups()
	}
	if c.RelayWriters <= 0 {
		c.RelayWriters = DefaultRelayWriters
	}
	if c.FakeGroups <= 0 {
		c.FakeGroups = DefaultFakeGroups
	}
	for _, v := range slices.Concat(c.Procs, c.Concurrency, c.LimitConcurrency) {
		if v < 1 {
			return errors.New("process counts and concurrencies must be at least 1")
		}
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&c.Warmup, DefaultWarmup)
	setDur(&c.Window, DefaultWindow)
	setDur(&c.LimitDuration, DefaultLimitDuration)
	setDur(&c.LatencyDuration, DefaultLatencyDuration)
	setDur(&c.SweepWarmup, DefaultSweepWarmup)
	setDur(&c.SweepWindow, DefaultSweepWindow)
	if c.SweepConc <= 0 {
		c.SweepConc = DefaultSweepConc
	}
	if c.SweepOnly && len(c.Sweep) == 0 {
		return errors.New("-sweep-only needs -sweep (try -sweep default)")
	}
	if len(c.LimitConcurrency) == 0 {
		c.LimitConcurrency = DefaultLimitConcurrency()
	}
	if c.LimitMessages <= 0 {
		c.LimitMessages = DefaultLimitMessages
	}
	if c.LatencyLoad <= 0 || c.LatencyLoad > 1 {
		c.LatencyLoad = DefaultLatencyLoad
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.MaxPrefill <= 0 {
		c.MaxPrefill = DefaultMaxPrefill
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// Result of a harness run.
type Result struct {
	Config         Config
	Machine        Machine
	Started, Ended time.Time
	// GoBenchStarted is when make bench's in-memory benchmarks began, before
	// the harness (a "started: " line of -inmem's file): zero if unknown.
	GoBenchStarted time.Time `json:",omitzero"`
	LoadBefore     string    // /proc/loadavg at start
	LoadAfter      string
	Limits         []Limits // measured before each round and at the end
	Args           string   // the harness's flags, for the report
	Command        string   // the command that ran it, for the report
	Runs           []Drain  // every saturated run of every round
	Latency        []Paced
	GoBench        []GoBench   // go test -bench results given with -inmem
	Relay          []RelayRun  // the relay comparison, aws regime
	HotGroup       []Drain     // one FIFO group, aws regime: a group's wait for its next message
	Profile        *CPUProfile `json:",omitempty"` // where the worker's CPU goes, emulator regime
	Sweep          *Sweep      `json:",omitempty"` // curves: one dimension at a time from today's point, aws regime
	Failures       []string    // runs that failed and were left out (the rest went on)
}

// limitAt is the limit at t, interpolated between the measurements taken
// before and after t (the nearest one outside them).
func (r *Result) limitAt(t time.Time) float64 {
	ls := r.Limits
	if len(ls) == 0 {
		return 0
	}
	if !t.After(ls[0].At) {
		return ls[0].Limit()
	}
	for i := 1; i < len(ls); i++ {
		if t.Before(ls[i].At) {
			a, b := ls[i-1], ls[i]
			f := float64(t.Sub(a.At)) / float64(b.At.Sub(a.At))
			return a.Limit() + f*(b.Limit()-a.Limit())
		}
	}
	return ls[len(ls)-1].Limit()
}

// setShares gives every run the limit at the middle of its window.
func (r *Result) setShares() {
	for i := range r.Runs {
		d := &r.Runs[i]
		if d.regime() != RegimeEmulator {
			continue
		}
		mid := d.Window.At.Add(-time.Duration(d.Seconds * float64(time.Second) / 2))
		d.Limit = r.limitAt(mid)
		d.LimitSeconds = d.Limit * d.Seconds
	}
}

// Limit is the mean of the limits measured in the run.
func (r *Result) Limit() float64 {
	var sum float64
	for _, l := range r.Limits {
		sum += l.Limit()
	}
	return sum / float64(max(len(r.Limits), 1))
}

// MeanLimits averages every rate of the limits measured in the run.
func (r *Result) MeanLimits() Limits {
	var m Limits
	for _, l := range r.Limits {
		m.SQS += l.SQS
		m.Put += l.Put
		m.Path += l.Path
		m.WritesPerMessage = l.WritesPerMessage
	}
	if n := float64(len(r.Limits)); n > 0 {
		m.SQS, m.Put, m.Path = m.SQS/n, m.Put/n, m.Path/n
	}
	return m
}

// Drains returns the saturated runs with the rounds of each configuration
// merged: counters and seconds summed, so Rate is the time-weighted mean;
// MinRate and MaxRate give the spread.
func (r *Result) Drains() []Drain {
	type key struct {
		regime, consumer string
		procs, conc      int
	}
	var order []key
	by := map[key]*Drain{}
	for _, d := range r.Runs {
		k := key{d.regime(), d.Consumer, d.Procs, d.Conc}
		a, ok := by[k]
		if !ok {
			c := d
			c.Window = sum([]Sample{d.Window})
			c.Rounds, c.MinRate, c.MaxRate = 1, d.Rate, d.Rate
			by[k] = &c
			order = append(order, k)
			continue
		}
		peak := max(a.Window.Counts[peakRSS], d.Window.Counts[peakRSS])
		a.Window = sum([]Sample{a.Window, d.Window})
		a.Window.Counts[peakRSS] = peak
		a.Seconds += d.Seconds
		a.LimitSeconds += d.LimitSeconds
		a.Rounds++
		a.MinRate, a.MaxRate = min(a.MinRate, d.Rate), max(a.MaxRate, d.Rate)
		a.Rate = a.Window.Counts["applied"] / a.Seconds
	}
	out := make([]Drain, len(order))
	for i, k := range order {
		out[i] = *by[k]
	}
	return out
}

// Drain is one saturated run: a pre-filled queue drained by a consumer.
type Drain struct {
	Regime      string // RegimeEmulator or RegimeAWS ("" in results from before the regimes: emulator)
	Consumer    string // worker, worker/<mode> or baseline (the hand-written consumer)
	Procs, Conc int
	Groups      int // message groups of a hot-group run; 0: the regime's default
	Prefill     int
	Window      Sample // counter deltas over the window (At: its end)
	Seconds     float64
	Rate        float64 // messages applied per second in the window
	Round       int     // 1-based
	// Load is the machine's load average (1, 5, 15 min) as the run's
	// window opened; "" in results from before it was kept.
	Load string `json:",omitempty"`
	// Profile is where the consumer's CPU went (aws regime, optimistic
	// worker and hand-written consumer, unless NoProfile).
	Profile *CPUProfile `json:",omitempty"`
	// Limit is the limit at the middle of the window, interpolated between
	// the measurements before and after it; LimitSeconds is Limit×Seconds
	// (summed when rounds merge).
	Limit        float64
	LimitSeconds float64

	// Set by Result.Drains when rounds are merged.
	Rounds           int
	MinRate, MaxRate float64
}

// Share is the rate as a share of the limit the emulators set while it ran.
func (r Drain) Share() float64 {
	if r.LimitSeconds <= 0 {
		return 0
	}
	return r.Window.Counts["applied"] / r.LimitSeconds
}

// PerMessage returns requests of service ("" for all) per applied message.
func (r Drain) PerMessage(service string) float64 { return perMessage(r.Window, service) }

// Op returns requests of "Service.Operation" per applied message.
func (r Drain) Op(op string) float64 {
	if n := r.Window.Counts["applied"]; n > 0 {
		return r.Window.Requests[op] / n
	}
	return 0
}

func perMessage(s Sample, service string) float64 {
	n := s.Counts["applied"]
	if n <= 0 {
		return 0
	}
	var total float64
	for k, v := range s.Requests {
		if service == "" || len(k) > len(service) && k[:len(service)+1] == service+"." {
			total += v
		}
	}
	return total / n
}

// Paced is a paced run: a producer sends at a fixed rate below
// saturation and every message's send-to-effect time is measured.
type Paced struct {
	Consumer      string
	Procs, Conc   int
	Offered       float64 // messages/s the producer achieved
	Messages      int
	P50, P99, Max time.Duration
	Window        Sample // counter deltas from before the first send to the last effect
}

type harness struct {
	cfg    Config
	raw    *clients // nil without the emulator regime
	bin    string
	self   string // this binary, for `bench consume`
	log    io.Writer
	limits Limits // the latest measured
	// prefillWait is what a consumer's start may take beyond StartTimeout
	// (a sweep's large backlogs, filled in the consumer's process).
	prefillWait time.Duration
}

// Run measures. ctx cancels it (worker processes are stopped, queues and
// tables deleted).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	// The sweep alone needs no emulators and no worker binary.
	emu := slices.Contains(cfg.Regimes, RegimeEmulator) && !cfg.SweepOnly
	h := &harness{cfg: cfg, log: cfg.Log, bin: cfg.WorkerBin, self: cfg.SelfBin}
	if emu {
		raw, err := newClients(ctx, 2*slices.Max(cfg.LimitConcurrency))
		if err != nil {
			return nil, err
		}
		defer raw.close()
		h.raw = raw
	}
	if h.self == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		h.self = self
	}
	res := &Result{Config: cfg, Machine: ReadMachine(), Started: time.Now(), LoadBefore: LoadAvg()}
	if cfg.SweepOnly {
		s, err := h.sweep(ctx)
		if err != nil {
			return nil, err
		}
		res.Sweep = s
		res.Ended, res.LoadAfter = time.Now(), LoadAvg()
		return res, nil
	}
	if h.bin == "" && emu {
		dir, err := os.MkdirTemp("", "exactly-bench")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		h.logf("building the worker")
		if h.bin, err = buildWorker(ctx, dir); err != nil {
			return nil, err
		}
	}

	for round := 1; round <= cfg.Rounds; round++ {
		for _, regime := range cfg.Regimes {
			if regime == RegimeEmulator {
				l, err := h.measureLimits(ctx)
				if err != nil {
					return nil, err
				}
				res.Limits = append(res.Limits, l)
			}
			for _, conc := range cfg.Concurrency {
				type job struct {
					kind  string
					procs int
				}
				var jobs []job
				if !cfg.NoBaseline {
					jobs = append(jobs, job{"baseline", 1})
				}
				for _, procs := range cfg.Procs {
					if regime == RegimeEmulator || procs == 1 {
						jobs = append(jobs, job{"worker", procs})
					}
				}
				for _, mode := range cfg.Compare {
					if regime == RegimeEmulator || mode == "grouped" || mode == "carried" {
						jobs = append(jobs, job{"worker/" + mode, 1})
					}
				}
				for _, j := range jobs {
					r, err := h.saturated(ctx, regime, j.kind, j.procs, conc, 0)
					if err != nil {
						if err := res.failed(ctx, h, err); err != nil {
							return nil, err
						}
						continue
					}
					r.Round = round
					res.Runs = append(res.Runs, r)
				}
			}
		}
	}
	if emu && !cfg.NoProfile {
		p, err := h.profile(ctx, ProfileConcurrency)
		if err != nil {
			if err := res.failed(ctx, h, fmt.Errorf("profile: %w", err)); err != nil {
				return nil, err
			}
		}
		res.Profile = p
	}
	if slices.Contains(cfg.Regimes, RegimeAWS) {
		conc := slices.Max(cfg.Concurrency)
		kinds := []string{"worker", "worker/grouped"}
		if !cfg.NoBaseline {
			kinds = append([]string{"baseline"}, kinds...)
		}
		for _, kind := range kinds {
			r, err := h.saturated(ctx, RegimeAWS, kind, 1, conc, 1)
			if err != nil {
				if err := res.failed(ctx, h, fmt.Errorf("hot group: %w", err)); err != nil {
					return nil, err
				}
				continue
			}
			res.HotGroup = append(res.HotGroup, r)
		}
	}
	if slices.Contains(cfg.Regimes, RegimeAWS) && !cfg.NoRelay {
		for _, g := range cfg.RelayGroups {
			for _, mode := range relayModes(g) {
				rr, err := h.measureRelay(ctx, mode, g, cfg.RelayWriters)
				if err != nil {
					if err := res.failed(ctx, h, fmt.Errorf("relay: %w", err)); err != nil {
						return nil, err
					}
					continue
				}
				res.Relay = append(res.Relay, rr)
			}
		}
	}
	if !emu {
		cfg.NoLatency = true
	}
	if !cfg.NoLatency && cfg.Effect != "ledger" {
		h.logf("latency runs skipped: they read applied_at from the ledger effect's entries")
	}
	if !cfg.NoLatency && cfg.Effect == "ledger" {
		conc := slices.Max(cfg.Concurrency)
		rate := math.Inf(1)
		for _, r := range res.Drains() {
			if r.Conc == conc && r.Procs == 1 && r.regime() == RegimeEmulator {
				rate = min(rate, r.Rate)
			}
		}
		rate *= cfg.LatencyLoad
		consumers := []string{"worker"}
		if !cfg.NoBaseline {
			consumers = append(consumers, "baseline")
		}
		for _, consumer := range consumers {
			l, err := h.latency(ctx, consumer, 1, conc, rate)
			if err != nil {
				return nil, err
			}
			res.Latency = append(res.Latency, l)
		}
	}
	if emu {
		l, err := h.measureLimits(ctx)
		if err != nil {
			return nil, err
		}
		res.Limits = append(res.Limits, l)
	}
	if len(cfg.Sweep) > 0 {
		s, err := h.sweep(ctx)
		if err != nil {
			return nil, err
		}
		res.Sweep = s
	}
	res.setShares()
	res.Ended = time.Now()
	res.LoadAfter = LoadAvg()
	return res, nil
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "bench: "+format+"\n", args...)
}

func (h *harness) measureLimits(ctx context.Context) (Limits, error) {
	start := time.Now()
	l := Limits{WritesPerMessage: writesPerMessage(h.cfg.Commit)}
	for _, conc := range h.cfg.LimitConcurrency {
		h.logf("limit: SQS receive+DeleteMessageBatch on %d messages, %d-way", h.cfg.LimitMessages, conc)
		v, err := measureSQS(ctx, h.raw, h.work(h.cfg.LimitMessages, h.cfg.Groups), conc)
		if err != nil {
			return l, err
		}
		l.SQS = max(l.SQS, v)
		h.logf("limit: DynamoDB conditional PutItem for %s, %d-way", h.cfg.LimitDuration, conc)
		if v, err = measurePut(ctx, h.raw, h.cfg.LimitDuration, conc); err != nil {
			return l, err
		}
		if v > l.Put {
			l.Put, l.PutConc = v, conc
		}
		h.logf("limit: the worker's DynamoDB path (%s commit) for %s, %d-way", h.cfg.Commit, h.cfg.LimitDuration, conc)
		if v, err = measurePath(ctx, h.raw, h.cfg.LimitDuration, conc, h.cfg.Effect, h.cfg.Commit); err != nil {
			return l, err
		}
		l.Path = max(l.Path, v)
	}
	l.At = start.Add(time.Since(start) / 2)
	h.logf("limit: SQS %.0f msg/s, PutItem %.0f/s (/%d = %.0f msg/s), DynamoDB path %.0f msg/s: limit %.0f msg/s (%s)",
		l.SQS, l.Put, l.WritesPerMessage, l.Put/float64(l.WritesPerMessage), l.Path, l.Limit(), l.By())
	h.limits = l
	return l, nil
}

var runSeq atomic.Int64

// work returns n messages over groups groups (0: one per message) with
// deduplication ids unique to this harness run.
func (h *harness) work(n, groups int) Work {
	if groups <= 0 {
		groups = n
	}
	w := Workload(n, groups)
	w.Prefix = strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(runSeq.Add(1), 10)
	return w
}

// resources are one run's queue and tables.
type resources struct{ url, dedup, ledger string }

func (h *harness) newResources(ctx context.Context) (resources, error) {
	var r resources
	var err error
	if r.url, err = h.raw.newQueue(ctx, "bench"); err != nil {
		return r, err
	}
	if r.dedup, err = h.raw.newTable(ctx, "bench-dedup", true); err != nil {
		h.raw.deleteQueue(r.url)
		return r, err
	}
	if r.ledger, err = h.raw.newTable(ctx, "bench-ledger", false); err != nil {
		h.raw.deleteQueue(r.url)
		h.raw.deleteTable(r.dedup)
		return r, err
	}
	return r, nil
}

func (h *harness) deleteResources(r resources) {
	h.raw.deleteQueue(r.url)
	h.raw.deleteTable(r.dedup)
	h.raw.deleteTable(r.ledger)
}

// source is a running consumer whose counters can be read.
type source interface {
	sample(ctx context.Context) (Sample, error)
}

type consumer struct {
	source
	stop func() error
}

// startConsumer starts procs worker processes or the baseline.
func (h *harness) startConsumer(ctx context.Context, kind string, procs, conc int, r resources) (*consumer, error) {
	if file, ok := strings.CutPrefix(kind, "profile:"); ok {
		return h.startProcs(ctx, h.self, 1, []string{"consume", "-regime", RegimeEmulator, "-consumer", ConsumerWorker,
			"-queue", r.url, "-table", r.dedup, "-ledger-table", r.ledger, "-concurrency", strconv.Itoa(conc), "-cpuprofile", file})
	}
	if kind == "baseline" {
		if h.cfg.Effect != "ledger" {
			b, err := startBaseline(ctx, r.url, r.ledger, h.cfg.Effect, conc)
			if err != nil {
				return nil, err
			}
			return &consumer{source: b, stop: func() error { b.stop(); return nil }}, nil
		}
		return h.startProcs(ctx, h.self, 1, []string{"consume", "-regime", RegimeEmulator, "-consumer", ConsumerHandwritten,
			"-queue", r.url, "-ledger-table", r.ledger, "-concurrency", strconv.Itoa(conc)})
	}
	commit, group := h.cfg.Commit, "0"
	if m, ok := strings.CutPrefix(kind, "worker/"); ok {
		commit = m
	}
	if commit == "grouped" {
		commit, group = "optimistic", GroupCommitWindow.String()
	}
	args := []string{"run", "--queue", r.url, "--effect", h.cfg.Effect, "--commit", commit, "--group-commit", group, "--table", r.dedup, "--ledger-table", r.ledger,
		"--concurrency", strconv.Itoa(conc), "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
		"--progress", "0", "--shutdown-timeout", "10s"}
	return h.startProcs(ctx, h.bin, procs, args)
}

// startFake starts a `bench consume` process of the aws regime: its own
// fakes behind the latency layer, pre-filled with n messages.
func (h *harness) startFake(ctx context.Context, kind string, conc, n, groups int, profile string, extra ...string) (*consumer, error) {
	c := ConsumerWorker
	switch kind {
	case "baseline":
		c = ConsumerHandwritten
	case "worker/grouped":
		c = ConsumerGrouped
	case "worker/carried":
		c = ConsumerCarried
	case ConsumerLambda, ConsumerLambdaHandwritten:
		c = kind
	}
	args := []string{"consume", "-regime", RegimeAWS, "-consumer", c, "-concurrency", strconv.Itoa(conc),
		"-prefill", strconv.Itoa(n), "-groups", strconv.Itoa(groups),
		"-latency-scale", strconv.FormatFloat(h.cfg.LatencyScale, 'g', -1, 64), "-jitter", strconv.FormatFloat(h.cfg.Jitter, 'g', -1, 64),
		"-seed", strconv.FormatUint(h.cfg.Seed+uint64(conc), 10)}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	return h.startProcs(ctx, h.self, 1, append(args, extra...))
}

// profiled reports whether a saturated run of the aws regime is profiled:
// the optimistic worker and the hand-written consumer, on a queue of the
// regime's default groups.
func (h *harness) profiled(kind string, groups int) bool {
	return !h.cfg.NoProfile && groups <= 0 && (kind == "worker" || kind == "baseline")
}

// startProcs starts procs processes of bin with args, each serving
// /metrics, and returns them as one consumer.
func (h *harness) startProcs(ctx context.Context, bin string, procs int, args []string) (*consumer, error) {
	ws := make(workerSource, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { ws[i], errs[i] = startWorker(ctx, bin, args, StartTimeout+h.prefillWait) })
	}
	wg.Wait()
	stop := func() error {
		var stopErrs []error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, w := range ws {
			if w != nil {
				wg.Go(func() {
					if err := w.stop(StopTimeout); err != nil {
						mu.Lock()
						stopErrs = append(stopErrs, err)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		return errors.Join(stopErrs...)
	}
	if err := errors.Join(errs...); err != nil {
		_ = stop()
		return nil, err
	}
	return &consumer{source: ws, stop: stop}, nil
}

// expected is a generous upper bound of a consumer's rate, to size the
// pre-fill: the baseline's ledger effect is one write, the worker's two.
func (h *harness) expected(kind string) float64 {
	l := h.limits
	switch {
	case kind == "baseline" && h.cfg.Effect == "noop":
		return l.SQS
	case kind == "baseline":
		return min(l.SQS, l.Put)
	}
	return min(l.SQS, max(l.Path, l.Put/2))
}

// saturated pre-fills a queue and measures how fast the consumer drains it,
// over a window that opens Warmup after its first effect and closes after
// Window, or earlier if the backlog runs low.
func (h *harness) saturated(ctx context.Context, regime, kind string, procs, conc, groups int) (Drain, error) {
	run := Drain{Regime: regime, Consumer: kind, Procs: procs, Conc: conc, Groups: groups}
	secs := (h.cfg.Warmup + h.cfg.Window).Seconds()
	var c *consumer
	var n int
	var profile string
	if regime == RegimeAWS {
		// At most conc transactions in flight, each held ~12 ms: a
		// generous bound of the rate.
		n = int(math.Ceil(float64(conc) / (Base("DynamoDB", "PutItem").Seconds() * h.cfg.LatencyScale) * secs * 1.5))
		n = min(max(n, 500), 2*h.cfg.MaxPrefill)
		if h.profiled(kind, groups) {
			dir, err := os.MkdirTemp("", "exactly-bench-profile")
			if err != nil {
				return run, err
			}
			defer os.RemoveAll(dir)
			profile = dir + "/cpu.pprof"
		}
		if groups <= 0 {
			groups = h.cfg.FakeGroups
		} else {
			n = min(n, 2000) // one group goes no faster than one message at a time
		}
		var err error
		if c, err = h.startFake(ctx, kind, conc, n, groups, profile); err != nil {
			return run, err
		}
	} else {
		// At least enough for the window at a few times the limit: on a
		// loaded machine the limit measured before may be far below what
		// a consumer reaches a minute later.
		n = int(math.Ceil(h.expected(kind) * secs * 1.5))
		n = min(max(n, MinPrefill), h.cfg.MaxPrefill)
		r, err := h.newResources(ctx)
		if err != nil {
			return run, err
		}
		defer h.deleteResources(r)
		w := h.work(n, h.cfg.Groups)
		fillRate, err := h.raw.fill(ctx, r.url, w, 8)
		if err != nil {
			return run, err
		}
		h.logf("%s procs=%d concurrency=%d: %d messages sent (%.0f msg/s)", kind, procs, conc, n, fillRate)
		if c, err = h.startConsumer(ctx, kind, procs, conc, r); err != nil {
			return run, err
		}
	}
	run.Prefill = n
	if err := h.measure(ctx, c, n, &run); err != nil {
		return run, fmt.Errorf("%s %s procs=%d concurrency=%d: %w", regime, kind, procs, conc, err)
	}
	if profile != "" {
		total, shares, err := readProfile(ctx, h.self, profile)
		if err != nil {
			return run, fmt.Errorf("%s %s concurrency=%d: profile: %w", regime, kind, conc, err)
		}
		run.Profile = &CPUProfile{Consumer: kind, Regime: regime, Conc: conc, Total: total, Categories: shares}
	}
	return run, nil
}

// measure samples c's window over a backlog of n, stops c and fills run's
// window, rate and counts, and logs them.
func (h *harness) measure(ctx context.Context, c *consumer, n int, run *Drain) error {
	run.Load = LoadAvg()
	s0, s1, err := h.window(ctx, c, n)
	if stopErr := c.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return err
	}
	run.Window = delta(s0, s1)
	run.Seconds = s1.At.Sub(s0.At).Seconds()
	run.Rate = run.Window.Counts["applied"] / run.Seconds
	h.logf("%s %s procs=%d concurrency=%d: %.0f msg/s over %.1fs, SQS %.3f req/msg, DynamoDB %.3f req/msg, %.0f WRU/msg, CPU %.0f µs/msg (%.2f cores), peak RSS %.0f MiB",
		run.regime(), run.Consumer, run.Procs, run.Conc, run.Rate, run.Seconds, run.PerMessage("SQS"), run.PerMessage("DynamoDB"), run.WriteUnits(), run.CPUPerMessage(), run.CPUBusy(), run.PeakRSS())
	for _, k := range []string{"retries", "busy", "permanent", "leases_lost", "receive_errors", "batch_failed", "failed"} {
		if v := run.Window.Counts[k]; v > 0 {
			h.logf("  note: %s %.0f in the window", k, v)
		}
	}
	return nil
}

// WarmupShare is the share of a run's backlog after which its warm-up
// ends early. A backlog sized for warm-up and window at 1.5 times the
// model is about a sixth applied when a warm-up at the model ends.
const WarmupShare = 0.3

// window waits for the first effect, then Warmup (or WarmupShare of the
// backlog applied), and samples the window.
func (h *harness) window(ctx context.Context, c *consumer, n int) (s0, s1 Sample, err error) {
	const poll = 250 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s, err := c.sample(ctx)
		if err != nil {
			return s0, s1, err
		}
		if s.Counts["applied"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			return s0, s1, errors.New("no effect applied within 2 minutes")
		}
		if err := sleep(ctx, poll); err != nil {
			return s0, s1, err
		}
	}
	// Warm up for Warmup, or until WarmupShare of the backlog is applied:
	// a backlog capped below what warm-up and window need at the consumer's
	// rate (the sweep's largest bodies: SweepBytes) keeps a window of its
	// own instead of running out during the warm-up.
	warm := time.Now().Add(h.cfg.Warmup)
	for {
		if s0, err = c.sample(ctx); err != nil {
			return s0, s1, err
		}
		if !time.Now().Before(warm) || s0.Counts["applied"] >= WarmupShare*float64(n) {
			break
		}
		if err := sleep(ctx, min(poll, time.Until(warm))); err != nil {
			return s0, s1, err
		}
	}
	// Close early while the backlog is still deep enough to keep every
	// consumer busy.
	low := 0.85 * float64(n)
	for {
		if err := sleep(ctx, poll); err != nil {
			return s0, s1, err
		}
		if s1, err = c.sample(ctx); err != nil {
			return s0, s1, err
		}
		if s1.At.Sub(s0.At) >= h.cfg.Window || s1.Counts["applied"] >= low {
			return s0, s1, nil
		}
	}
}

// latency runs a paced producer at rate for LatencyDuration against a
// consumer, waits for every effect and reads each message's send-to-effect
// time: from the start of its SendMessage call to the applied_at (epoch ms)
// of its ledger entry. Every message has its own group.
func (h *harness) latency(ctx context.Context, kind string, procs, conc int, rate float64) (Paced, error) {
	lr := Paced{Consumer: kind, Procs: procs, Conc: conc}
	if h.cfg.Effect != "ledger" {
		return lr, errors.New("latency runs need the ledger effect (its entries carry applied_at)")
	}
	n := max(int(rate*h.cfg.LatencyDuration.Seconds()), 20)
	r, err := h.newResources(ctx)
	if err != nil {
		return lr, err
	}
	defer h.deleteResources(r)
	c, err := h.startConsumer(ctx, kind, procs, conc, r)
	if err != nil {
		return lr, err
	}
	defer func() { _ = c.stop() }()
	// Let the receivers start their long polls.
	if err := sleep(ctx, time.Second); err != nil {
		return lr, err
	}
	s0, err := c.sample(ctx)
	if err != nil {
		return lr, err
	}
	h.logf("%s latency: sending %d messages at %.0f msg/s", kind, n, rate)
	sent, offered, err := h.paced(ctx, r.url, h.work(n, 0), rate)
	if err != nil {
		return lr, err
	}
	lr.Offered = offered
	var s1 Sample
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if s1, err = c.sample(ctx); err != nil {
			return lr, err
		}
		if s1.Counts["applied"]-s0.Counts["applied"] >= float64(n) {
			break
		}
		if time.Now().After(deadline) {
			return lr, fmt.Errorf("%s latency: %v of %d effects after 2 minutes", kind, s1.Counts["applied"]-s0.Counts["applied"], n)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return lr, err
		}
	}
	lr.Window = delta(s0, s1)
	applied, err := h.appliedAt(ctx, r.ledger)
	if err != nil {
		return lr, err
	}
	var ds []time.Duration
	for id, at := range applied {
		if t, ok := sent[id]; ok {
			ds = append(ds, time.Duration(at-t)*time.Millisecond)
		}
	}
	if len(ds) < n {
		return lr, fmt.Errorf("%s latency: %d of %d entries found", kind, len(ds), n)
	}
	lr.Messages = len(ds)
	ps := Percentiles(ds, 0.5, 0.99, 1)
	lr.P50, lr.P99, lr.Max = ps[0], ps[1], ps[2]
	h.logf("%s latency at %.0f msg/s: p50 %s, p99 %s, max %s; SQS %.3f req/msg", kind, offered, lr.P50, lr.P99, lr.Max, perMessage(lr.Window, "SQS"))
	return lr, nil
}

// paced sends w at rate from a few goroutines; it returns each message's
// send start (epoch ms) by message id and the rate achieved.
func (h *harness) paced(ctx context.Context, url string, w Work, rate float64) (map[string]int64, float64, error) {
	const senders = 8
	idx := make(chan int)
	var mu sync.Mutex
	sent := make(map[string]int64, w.N)
	var firstErr error
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := range idx {
				e := w.Entry(i)
				t := time.Now().UnixMilli()
				out, err := h.raw.sqs.SendMessage(ctx, &sqs.SendMessageInput{
					QueueUrl: &url, MessageBody: e.MessageBody, MessageGroupId: e.MessageGroupId, MessageDeduplicationId: e.MessageDeduplicationId,
				})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				} else if err == nil {
					sent[aws.ToString(out.MessageId)] = t
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	for i := range w.N {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case idx <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(idx)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, 0, fmt.Errorf("paced send: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return sent, float64(w.N) / elapsed.Seconds(), nil
}

// appliedAt scans the ledger table's entries: applied_at by message id.
func (h *harness) appliedAt(ctx context.Context, table string) (map[string]int64, error) {
	out := map[string]int64{}
	p := dynamodb.NewScanPaginator(h.raw.db, &dynamodb.ScanInput{
		TableName:                &table,
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("pk, message_id, applied_at"),
		ExpressionAttributeNames: nil,
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot scan the ledger: %w", err)
		}
		for _, it := range page.Items {
			id, ok1 := it["message_id"].(*ddbtypes.AttributeValueMemberS)
			at, ok2 := it["applied_at"].(*ddbtypes.AttributeValueMemberN)
			if !ok1 || !ok2 {
				continue
			}
			ms, err := strconv.ParseInt(at.Value, 10, 64)
			if err != nil {
				return nil, err
			}
			out[id.Value] = ms
		}
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// regime is the run's regime; results from before the regimes were all at
// emulator speed.
func (r Drain) regime() string {
	if r.Regime == "" {
		return RegimeEmulator
	}
	return r.Regime
}

// GroupWait is the mean time a FIFO group waited for its next message:
// from the end of one message's effect (the writes built, before the
// commit) to the start of the next one's in the same group. 0: not
// measured (the emulator regime's worker is cmd/worker).
func (r Drain) GroupWait() time.Duration {
	if n := r.Window.Counts["group_waits"]; n > 0 {
		return time.Duration(float64(time.Second) * r.Window.Counts["group_wait_seconds"] / n)
	}
	return 0
}

// CPUPerMessage is the consumer processes' CPU time per applied message in
// the window (start-up excluded), in µs; 0 if not measured.
func (r Drain) CPUPerMessage() float64 {
	if n := r.Window.Counts["applied"]; n > 0 {
		return 1e6 * r.Window.Counts["cpu_seconds"] / n
	}
	return 0
}

// CPUBusy is the consumer processes' CPU time over the window's wall time:
// 1.0 is one core busy.
func (r Drain) CPUBusy() float64 {
	if r.Seconds > 0 {
		return r.Window.Counts["cpu_seconds"] / r.Seconds
	}
	return 0
}

// PeakRSS is the consumer processes' peak resident set, MiB (summed over
// processes).
func (r Drain) PeakRSS() float64 { return r.Window.Counts[peakRSS] / (1 << 20) }

// WriteUnits is DynamoDB write units per applied message.
func (r Drain) WriteUnits() float64 {
	if n := r.Window.Counts["applied"]; n > 0 {
		return r.Window.Counts["dynamodb_wru"] / n
	}
	return 0
}

// ProfileConcurrency is the concurrency of the profiled run.
const ProfileConcurrency = 16

// profile runs the worker (the library with the SDK clients, in a `bench
// consume` process) through a saturated run at emulator speed with a CPU
// profile, and sums the profile by category.
func (h *harness) profile(ctx context.Context, conc int) (*CPUProfile, error) {
	dir, err := os.MkdirTemp("", "exactly-bench-profile")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := dir + "/cpu.pprof"
	if _, err := h.saturated(ctx, RegimeEmulator, "profile:"+file, 1, conc, 0); err != nil {
		return nil, err
	}
	total, shares, err := readProfile(ctx, h.self, file)
	if err != nil {
		return nil, err
	}
	p := &CPUProfile{Consumer: "worker", Regime: RegimeEmulator, Conc: conc, Total: total, Categories: shares}
	for _, c := range shares {
		h.logf("profile: %5.1f%% %s", 100*float64(c.Time)/float64(max(total, 1)), c.Name)
	}
	return p, nil
}

// failed records a run's failure and lets the harness go on, unless ctx
// ended (then it returns ctx's error).
func (r *Result) failed(ctx context.Context, h *harness, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	h.logf("FAILED, left out: %v", err)
	r.Failures = append(r.Failures, firstLine(err.Error()))
	return nil
}
