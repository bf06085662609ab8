package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dimensions of a sweep: each moves one thing away from today's point
// (DefaultFakeGroups groups, the bare deposit of about 50 B, one queue, a
// backlog of a few seconds, an effect with no wait of its own).
const (
	SweepGroups  = "groups"  // message groups of the pre-filled queue
	SweepSize    = "size"    // bytes of each body
	SweepQueues  = "queues"  // queues one consumer reads
	SweepBacklog = "backlog" // messages waiting when the consumer starts
	SweepEffect  = "effect"  // how long each effect waits before it builds its writes
	SweepRelay   = "relay"   // message groups of the relay's producers
	// SweepRelayWriters is the relay's producer goroutines, over
	// RelayWritersGroups groups.
	SweepRelayWriters = "relay-writers"
	// The Lambda handler under a modelled event source mapping, beside a
	// hand-written handler: values B or B+WINDOW (batch size 1 to 10, and
	// a batching window).
	SweepLambda         = "lambda"          // on the FIFO queue
	SweepLambdaStandard = "lambda-standard" // on a standard queue
)

// sweepDims are the dimensions in the order a plan runs and a report shows them.
var sweepDims = []string{SweepGroups, SweepSize, SweepQueues, SweepBacklog, SweepEffect, SweepRelay, SweepRelayWriters, SweepLambda, SweepLambdaStandard}

// DefaultSweep is the sweep: -sweep default.
const DefaultSweep = "groups=1,10,100,1000,10000,100000;size=100,10KiB,256KiB,1MiB;queues=1,10,50;" +
	"backlog=10000,100000,1000000;effect=1ms,100ms,10s;relay=1,10,100,1000,10000,100000;relay-writers=1,4,16,64;lambda=1,2,5,10,10+500ms;lambda-standard=1,10"

// Defaults of a sweep's runs.
const (
	DefaultSweepConc   = 16
	DefaultSweepWarmup = 500 * time.Millisecond
	DefaultSweepWindow = 2 * time.Second
	// SweepBytes caps a point's pre-fill at this many body bytes, so that
	// the largest messages fit the machine's memory: 1 MiB bodies drain
	// from a backlog of 512.
	SweepBytes = 512 << 20
	// SweepVisibility is the visibility timeout of the fakes' queues
	// (`bench consume`).
	SweepVisibility = 30 * time.Second
	// PrefillByteTime is what a body's byte adds to a consumer's start
	// (the fake checks and hashes every body it is sent).
	PrefillByteTime = 100 * time.Nanosecond
)

// SweepPoint is one point of a sweep: today's point with one dimension
// moved. Zero fields are today's.
type SweepPoint struct {
	Dim         string
	Label       string // the value as given ("10KiB", "100ms")
	Groups      int    // 0: DefaultFakeGroups
	Size        int    // 0: the bare deposit
	Queues      int    // 0: 1
	Backlog     int    // 0: sized to the window at the modelled rate
	EffectDelay time.Duration
	RelayGroups int // relay points only
	// RelayWriters is a relay-writers point's producers (0: the run's
	// -relay-writers).
	RelayWriters int `json:",omitempty"`
	// Lambda points only: the event source mapping's batch size and
	// batching window.
	Batch       int           `json:",omitempty"`
	BatchWindow time.Duration `json:",omitempty"`
}

// same says whether p and q are one point, however their values were
// written ("100" and "100B" are one size).
func (p SweepPoint) same(q SweepPoint) bool {
	p.Label, q.Label = "", ""
	return p == q
}

// isLambda reports whether dim runs the Lambda handlers.
func isLambda(dim string) bool { return dim == SweepLambda || dim == SweepLambdaStandard }

// isRelay reports whether dim's points measure the outbox's producers and
// relay against a direct producer (not a consumer).
func isRelay(dim string) bool { return dim == SweepRelay || dim == SweepRelayWriters }

// RelayWritersGroups is the groups a relay-writers point's producers
// write to: many, so that the writers, not one group's head, set the pace.
const RelayWritersGroups = 1000

// sweepConsumers are the two consumers of dim's points: the baseline (the
// "× hand-written" column) and the library's, as SweepRun.Consumer names
// them.
func sweepConsumers(dim string) (base, lib string) {
	if isLambda(dim) {
		return ConsumerLambdaHandwritten, ConsumerLambda
	}
	return "baseline", "worker"
}

// X is the point's value on its dimension's axis.
func (p SweepPoint) X() float64 {
	switch p.Dim {
	case SweepGroups:
		return float64(p.Groups)
	case SweepSize:
		return float64(p.Size)
	case SweepQueues:
		return float64(p.Queues)
	case SweepBacklog:
		return float64(p.Backlog)
	case SweepEffect:
		return p.EffectDelay.Seconds()
	case SweepRelay:
		return float64(p.RelayGroups)
	case SweepRelayWriters:
		return float64(p.RelayWriters)
	case SweepLambda, SweepLambdaStandard:
		return float64(p.Batch)
	}
	return 0
}

func (p SweepPoint) groups() int { return cmp0(p.Groups, DefaultFakeGroups) }
func (p SweepPoint) queues() int { return cmp0(p.Queues, 1) }

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// ParseSweep reads a plan: "dim=v1,v2;dim=..." over sweepDims, or
// "default" (DefaultSweep). Sizes take B, KiB and MiB; effect durations
// are Go durations.
func ParseSweep(spec string) ([]SweepPoint, error) {
	spec = strings.TrimSpace(spec)
	if spec == "default" {
		spec = DefaultSweep
	}
	var out []SweepPoint
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		dim, values, ok := strings.Cut(part, "=")
		dim = strings.TrimSpace(dim)
		if !ok || !slices.Contains(sweepDims, dim) {
			return nil, fmt.Errorf("-sweep %q: want dim=v1,v2,... with dim one of %s", part, strings.Join(sweepDims, ", "))
		}
		if seen[dim] {
			return nil, fmt.Errorf("-sweep: %s given twice", dim)
		}
		seen[dim] = true
		for _, v := range strings.Split(values, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			p, err := sweepPoint(dim, v)
			if err != nil {
				return nil, fmt.Errorf("-sweep %s=%s: %w", dim, v, err)
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-sweep: no points (try -sweep default)")
	}
	slices.SortStableFunc(out, func(a, b SweepPoint) int { return slices.Index(sweepDims, a.Dim) - slices.Index(sweepDims, b.Dim) })
	return out, nil
}

func sweepPoint(dim, v string) (SweepPoint, error) {
	p := SweepPoint{Dim: dim, Label: v}
	if dim == SweepEffect {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return p, errors.New("want a positive duration such as 100ms")
		}
		p.EffectDelay = d
		return p, nil
	}
	if isLambda(dim) {
		b, w, hasWindow := strings.Cut(v, "+")
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > 10 {
			return p, errors.New("want a batch size from 1 to 10, optionally with a batching window (10+500ms)")
		}
		p.Batch = n
		if hasWindow {
			d, err := time.ParseDuration(w)
			if err != nil || d <= 0 || d > maxBatchingWindow {
				return p, fmt.Errorf("batching window %q: want a duration above 0 and up to %s, such as 500ms", w, maxBatchingWindow)
			}
			p.BatchWindow = d
		}
		return p, nil
	}
	if dim == SweepSize {
		n, err := parseBytes(v)
		if err != nil {
			return p, err
		}
		if n > maxBatchBytes {
			return p, fmt.Errorf("%d bytes is over SQS's maximum message size of 1 MiB", n)
		}
		p.Size = n
		return p, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return p, errors.New("want a positive integer")
	}
	switch dim {
	case SweepGroups:
		p.Groups = n
	case SweepQueues:
		p.Queues = n
	case SweepBacklog:
		p.Backlog = n
	case SweepRelay:
		p.RelayGroups = n
	case SweepRelayWriters:
		p.RelayGroups, p.RelayWriters = RelayWritersGroups, n
	}
	return p, nil
}

// parseBytes reads 100, 100B, 10KiB or 1MiB.
func parseBytes(v string) (int, error) {
	mult := 1
	num := v
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"B", 1}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 {
		return 0, errors.New("want a size such as 100, 10KiB or 1MiB")
	}
	return n * mult, nil
}

// Sweep is a sweep's results: its own run, so that it can be measured
// apart from the rest and merged into a report (-sweep-from).
type Sweep struct {
	Started, Ended        time.Time
	LoadBefore, LoadAfter string
	Command               string
	Commit                string
	Conc                  int
	Warmup, Window        time.Duration
	LatencyScale          float64
	Runs                  []SweepRun
	Failures              []SweepFailure
}

// SweepFailure is a run of a point that failed or was not run, and why.
type SweepFailure struct {
	Point SweepPoint
	// Text says which run and why, the point first ("effect=10s
	// hand-written consumer not run: ..."), as the page lists it.
	Text string
}

// UnmarshalJSON reads a failure, or the bare string of results written
// before failures had their point: such a failure's point is its text's
// first word ("size=1MiB") and Merge matches it by that.
func (f *SweepFailure) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		f.Point = SweepPoint{}
		return json.Unmarshal(b, &f.Text)
	}
	type plain SweepFailure
	return json.Unmarshal(b, (*plain)(f))
}

// failed records a failure of a run at p.
func (s *Sweep) failed(p SweepPoint, format string, args ...any) {
	s.Failures = append(s.Failures, SweepFailure{Point: p, Text: p.Dim + "=" + p.Label + " " + fmt.Sprintf(format, args...)})
}

// of reports whether f is a failure at p: by its point, or, for a failure
// read from older results, by the point's name starting its text.
func (f SweepFailure) of(p SweepPoint) bool {
	if f.Point.Dim == "" {
		return strings.HasPrefix(f.Text, p.Dim+"="+p.Label+" ")
	}
	return f.Point.same(p)
}

// SweepRun is one consumer at one point.
type SweepRun struct {
	Point    SweepPoint
	Consumer string    // worker or baseline; for relay points the relay mode
	Drain    Drain     // consumer points
	Relay    *RelayRun `json:",omitempty"` // relay points
	Model    float64   // the rate the modelled latency allows this consumer, msg/s
	Load     string    // /proc/loadavg as the run started
	// Paced is the consumer's paced run at the point, after both drains
	// (consumer points but backlog points); nil: not measured, or a sweep
	// from before paced runs.
	Paced *SweepPaced `json:",omitempty"`
}

// PacedShare is a paced run's load: the share of the slower consumer's
// drain rate at the point that its producer sends.
const PacedShare = 0.5

// SweepPaced is a consumer's paced run at a point: a producer in its
// `bench consume` process sends PacedShare of the slower consumer's drain
// rate, spread over the point's groups and queues with its bodies, from
// an empty queue, for the point's warm-up and window; every message sent
// in the window is measured, from the start of its SendMessage (held by
// the latency layer as a real producer's) to the start of its first
// effect's writes (where the ledger stamps applied_at).
type SweepPaced struct {
	Rate     float64       // msg/s asked
	Offered  float64       // msg/s the window's messages were sent at
	Messages int           // the window's messages, every one measured
	P50, P99 time.Duration // send → effect start, nearest rank
	Seconds  float64       // the run's wall time, from the process's start to its stop
	Load     string        // /proc/loadavg as the run started
}

// pacedDim reports whether dim's points get paced runs: not the backlog's
// (a paced run starts from an empty queue, and the backlog is the point)
// nor the relay's (they measure producers, not consumers).
func pacedDim(dim string) bool { return dim != SweepBacklog && !isRelay(dim) }

// ModelRate is the rate the latency model allows at p for consumer at
// concurrency conc: every message takes one transaction plus its effect's
// wait (m); a group's batch of b messages takes a receive, b of those in
// order and a delete. The worker keeps conc messages in flight (conc/m
// over many groups); the hand-written consumer's conc loops each hold one
// batch at a time. Both are bounded by the groups' batches.
func ModelRate(p SweepPoint, consumer string, conc int, scale float64) float64 {
	if isLambda(p.Dim) {
		return LambdaModelRate(p, consumer, conc, scale, 1)
	}
	tx := Base("DynamoDB", "TransactWriteItems").Seconds() * scale
	rt := Base("SQS", "ReceiveMessage").Seconds() * scale
	m := tx + p.EffectDelay.Seconds()
	g := float64(p.groups())
	b := 10.0
	batch := b / (2*rt + b*m) // one group's rate
	if consumer == "baseline" {
		return math.Min(float64(conc), g) * batch
	}
	return math.Min(float64(conc)/m, g*batch)
}

// LambdaModelRate is the rate the latency model allows a Lambda point's
// consumer, with conc poller loops (the mapping's concurrency), batch size
// b and depth messages waiting in each FIFO group. Each loop, a batch at a
// time: one receive (rt), the batch's commits, one DeleteMessageBatch (rt):
//
//	rate = conc × b / (2·rt + lanes × m),   m = tx + the effect's wait
//
// where lanes is how many of the batch's messages go one after another.
// The hand-written handler runs the batch in turn: lanes = b. The
// library's handler runs a FIFO batch's groups in parallel (up to its
// Config.Concurrency, 10: every group of a batch of at most 10) and each
// group's messages in turn; a FIFO receive hands a group's waiting
// messages together, so the longest group of a batch holds min(b, depth)
// messages: lanes = min(b, ceil(depth)). On a standard queue every
// message is its own lane: lanes = 1. A batching window adds nothing
// while the backlog fills every batch at its first receive. FIFO points
// are also bounded by their groups: at most one batch per group in flight.
func LambdaModelRate(p SweepPoint, consumer string, conc int, scale, depth float64) float64 {
	tx := Base("DynamoDB", "TransactWriteItems").Seconds() * scale
	rt := Base("SQS", "ReceiveMessage").Seconds() * scale
	m := tx + p.EffectDelay.Seconds()
	b := float64(cmp0(p.Batch, 10))
	lanes := b
	if consumer == ConsumerLambda {
		lanes = 1
		if p.Dim == SweepLambda {
			lanes = min(b, math.Ceil(max(depth, 1)))
		}
	}
	loops := float64(conc)
	if p.Dim == SweepLambda {
		loops = min(loops, float64(p.groups()))
	}
	return loops * b / (2*rt + lanes*m)
}

// sweepModel is the model of a run at p that pre-filled prefill messages.
func sweepModel(p SweepPoint, consumer string, conc int, scale float64, prefill int) float64 {
	if isLambda(p.Dim) {
		return LambdaModelRate(p, consumer, conc, scale, float64(prefill)/float64(p.groups()))
	}
	return ModelRate(p, consumer, conc, scale)
}

// sweepPrefill is the backlog of a consumer point: the point's own, or
// enough for warmup and window at 1.5 times the model, at least one
// message per group, within SweepBytes.
func sweepPrefill(p SweepPoint, conc int, scale float64, secs float64) int {
	if p.Backlog > 0 {
		return p.Backlog
	}
	rate := ModelRate(p, "worker", conc, scale)
	switch p.Dim {
	case SweepLambda:
		// Today's backlog, as the other dimensions' (about 8 messages a
		// group at 1024 groups): a FIFO batch's groups depend on it.
		rate = ModelRate(SweepPoint{Groups: p.Groups}, "worker", conc, scale)
	case SweepLambdaStandard:
		rate = LambdaModelRate(p, ConsumerLambda, conc, scale, 1)
	}
	n := int(math.Ceil(rate * secs * 1.5))
	n = max(n, 500, min(p.groups(), 200000))
	if p.Size > 0 {
		n = min(n, max(SweepBytes/p.Size, 100))
	}
	return n
}

// sweepTimes are a point's warm-up and window: a slow effect gets at
// least one effect's time to warm up and three to measure.
func (h *harness) sweepTimes(p SweepPoint) (warmup, window time.Duration) {
	warmup, window = h.cfg.SweepWarmup, h.cfg.SweepWindow
	if p.EffectDelay > 0 {
		warmup = max(warmup, p.EffectDelay)
		window = max(window, 3*p.EffectDelay)
	}
	return warmup, window
}

// sweep runs every point of the plan: the hand-written consumer and the
// worker for consumer points, the direct producer, the outbox with the
// relay's defaults and with GroupBatch for relay points.
func (h *harness) sweep(ctx context.Context) (*Sweep, error) {
	s := &Sweep{Started: time.Now(), LoadBefore: LoadAvg(), Conc: h.cfg.SweepConc, Warmup: h.cfg.SweepWarmup, Window: h.cfg.SweepWindow,
		LatencyScale: h.cfg.LatencyScale, Commit: ReadMachine().Commit}
	for _, p := range h.cfg.Sweep {
		warmup, window := h.sweepTimes(p)
		hs := *h
		hs.cfg.Warmup, hs.cfg.Window = warmup, window
		if isRelay(p.Dim) {
			writers := cmp0(p.RelayWriters, h.cfg.RelayWriters)
			for _, mode := range []string{RelayDirect, RelayOutbox, RelayGroupBatch} {
				load := LoadAvg()
				rr, err := hs.measureRelay(ctx, mode, p.RelayGroups, writers)
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					s.failed(p, "%s: %v", mode, err)
					continue
				}
				s.Runs = append(s.Runs, SweepRun{Point: p, Consumer: mode, Relay: &rr, Load: load})
			}
			continue
		}
		base, lib := sweepConsumers(p.Dim)
		for _, kind := range []string{base, lib} {
			if kind == "baseline" && 10*p.EffectDelay > SweepVisibility {
				s.failed(p, "hand-written consumer not run: its 10 effects in turn (%s) outlive the %s visibility timeout",
					10*p.EffectDelay, SweepVisibility)
				continue
			}
			load := LoadAvg()
			d, err := hs.sweepDrain(ctx, kind, p)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				h.logf("FAILED, left out: %v", err)
				s.failed(p, "%s: %v", kind, firstLine(err.Error()))
				continue
			}
			s.Runs = append(s.Runs, SweepRun{Point: p, Consumer: kind, Drain: d, Model: sweepModel(p, kind, h.cfg.SweepConc, h.cfg.LatencyScale, d.Prefill), Load: load})
		}
		if pacedDim(p.Dim) {
			if err := hs.sweepPacedPoint(ctx, s, p); err != nil {
				return nil, err
			}
		}
	}
	s.Ended, s.LoadAfter = time.Now(), LoadAvg()
	return s, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// sweepDrain is one consumer point: a `bench consume` process on the
// fakes held at the modelled latency, pre-filled for the point.
func (h *harness) sweepDrain(ctx context.Context, kind string, p SweepPoint) (Drain, error) {
	conc := h.cfg.SweepConc
	run := Drain{Regime: RegimeAWS, Consumer: kind, Procs: 1, Conc: conc, Groups: p.groups()}
	n := sweepPrefill(p, conc, h.cfg.LatencyScale, (h.cfg.Warmup + h.cfg.Window).Seconds())
	extra := sweepArgs(p)
	h.logf("sweep %s=%s %s: pre-filling %d messages", p.Dim, p.Label, kind, n)
	h.prefillWait = time.Duration(n)*PrefillTime + time.Duration(n*p.Size)*PrefillByteTime
	c, err := h.startFake(ctx, kind, conc, n, p.groups(), "", extra...)
	if err != nil {
		return run, err
	}
	run.Prefill = n
	if err := h.measure(ctx, c, n, &run); err != nil {
		return run, fmt.Errorf("sweep %s=%s %s: %w", p.Dim, p.Label, kind, err)
	}
	return run, nil
}

// sweepArgs are the `bench consume` flags of point p.
func sweepArgs(p SweepPoint) []string {
	extra := []string{"-size", strconv.Itoa(p.Size), "-queues", strconv.Itoa(p.queues()), "-effect-delay", p.EffectDelay.String()}
	if isLambda(p.Dim) {
		extra = append(extra, "-batch", strconv.Itoa(p.Batch), "-window", p.BatchWindow.String())
		if p.Dim == SweepLambdaStandard {
			extra = append(extra, "-standard")
		}
	}
	return extra
}

// sweepPacedPoint runs each of p's two consumers paced at PacedShare of
// the slower one's drain rate, and keeps the readings on their runs. A
// point without both drains, or with one that applied nothing, is
// recorded as not measured. It returns an error only when ctx ends.
func (h *harness) sweepPacedPoint(ctx context.Context, s *Sweep, p SweepPoint) error {
	base, lib := sweepConsumers(p.Dim)
	var idx []int
	var missing []string
	rate := math.Inf(1)
	for _, kind := range []string{base, lib} {
		i := slices.IndexFunc(s.Runs, func(r SweepRun) bool { return r.Point.Dim == p.Dim && r.Point.Label == p.Label && r.Consumer == kind })
		switch {
		case i < 0:
			missing = append(missing, consumerName(kind)+"'s drain did not run")
		case s.Runs[i].Drain.Rate <= 0:
			missing = append(missing, consumerName(kind)+"'s drain applied nothing")
		default:
			idx = append(idx, i)
			rate = min(rate, s.Runs[i].Drain.Rate)
		}
	}
	if len(missing) > 0 {
		s.failed(p, "send → effect not measured: %s", strings.Join(missing, "; "))
		return nil
	}
	rate = pacedRate(p, rate, h.cfg.LatencyScale)
	for _, i := range idx {
		kind := s.Runs[i].Consumer
		load := LoadAvg()
		pr, err := h.sweepPaced(ctx, kind, p, rate)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			h.logf("FAILED, left out: %v", err)
			s.failed(p, "%s send → effect: %v", kind, firstLine(err.Error()))
			continue
		}
		pr.Load = load
		s.Runs[i].Paced = &pr
	}
	return nil
}

// pacedRate is the pace of p's paced runs: PacedShare of the slower
// drain, and no more than PacedShare of what its FIFO groups carry one
// message at a time. A drain receives a group's messages 10 at a time, but
// a paced message arrives alone, and SQS hands out none of its group until
// the one before is deleted: a group then moves one message a cycle (the
// receive's answer, the commit, the delete reaching SQS, and the effect's
// own wait), about 27 ms at the model. At one or ten groups half the drain
// is that limit, and a message's time would be queueing behind its group's
// last delete, not the consumer's.
func pacedRate(p SweepPoint, slower, scale float64) float64 {
	rate := PacedShare * slower
	if p.Dim == SweepLambdaStandard {
		return rate // no groups
	}
	cycle := (Base("SQS", "ReceiveMessage")/2+Base("DynamoDB", "TransactWriteItems")+Base("SQS", "DeleteMessageBatch")/2).Seconds()*max(scale, 0) + p.EffectDelay.Seconds()
	if cycle <= 0 {
		return rate
	}
	return min(rate, PacedShare*float64(p.groups())/cycle)
}

// sweepPaced is one consumer's paced run at p: a `bench consume -pace`
// process with no pre-fill, read once its producer has stopped and every
// message of its window has had its effect.
func (h *harness) sweepPaced(ctx context.Context, kind string, p SweepPoint, rate float64) (SweepPaced, error) {
	pr := SweepPaced{Rate: rate}
	began := time.Now()
	extra := append(sweepArgs(p), "-pace", strconv.FormatFloat(rate, 'f', 1, 64),
		"-pace-warmup", h.cfg.Warmup.String(), "-pace-window", h.cfg.Window.String())
	h.logf("sweep %s=%s %s: paced at %.0f msg/s", p.Dim, p.Label, kind, rate)
	h.prefillWait = 0
	c, err := h.startFake(ctx, kind, h.cfg.SweepConc, 0, p.groups(), "", extra...)
	if err != nil {
		return pr, fmt.Errorf("sweep %s=%s %s paced: %w", p.Dim, p.Label, kind, err)
	}
	var last Sample
	deadline := time.Now().Add(h.cfg.Warmup + h.cfg.Window + 2*time.Minute)
	for {
		if err = sleep(ctx, 250*time.Millisecond); err != nil {
			break
		}
		if last, err = c.sample(ctx); err != nil {
			break
		}
		n := last.Counts
		if n["paced_done"] > 0 && n["paced_measured"] >= n["paced_sent"] {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("%.0f of the window's %.0f messages had their effect 2 minutes after the window", n["paced_measured"], n["paced_sent"])
			break
		}
	}
	if stopErr := c.stop(); err == nil {
		err = stopErr
	}
	if err == nil && last.Counts["paced_sent"] == 0 {
		err = errors.New("no message sent in the window")
	}
	if err != nil {
		return pr, fmt.Errorf("sweep %s=%s %s paced: %w", p.Dim, p.Label, kind, err)
	}
	pr.Messages = int(last.Counts["paced_measured"])
	pr.Offered = last.Counts["paced_offered"]
	pr.P50 = time.Duration(last.Counts["send_effect_p50"] * float64(time.Second)).Round(time.Microsecond)
	pr.P99 = time.Duration(last.Counts["send_effect_p99"] * float64(time.Second)).Round(time.Microsecond)
	pr.Seconds = time.Since(began).Seconds()
	h.logf("sweep %s=%s %s paced at %.0f msg/s (sent at %.0f): send → effect p50 %s, p99 %s over %d messages; %.1fs", p.Dim, p.Label, kind, rate, pr.Offered, pr.P50, pr.P99, pr.Messages, pr.Seconds)
	return pr, nil
}

// Merge returns s with later's runs: a point and consumer later measured
// replaces s's, and a failure of a point later measured is dropped. The
// runs are ordered by dimension and value; the commands are both.
func (s *Sweep) Merge(later *Sweep) *Sweep {
	if s == nil {
		c := *later
		return &c
	}
	out := *s
	out.Runs = slices.Clone(s.Runs)
	for _, r := range later.Runs {
		i := slices.IndexFunc(out.Runs, func(o SweepRun) bool {
			return o.Point.same(r.Point) && o.Consumer == r.Consumer
		})
		if i >= 0 {
			out.Runs[i] = r
		} else {
			out.Runs = append(out.Runs, r)
		}
	}
	// A point later measured, or later failed again, keeps only its later word.
	var points []SweepPoint
	for _, r := range later.Runs {
		points = append(points, r.Point)
	}
	for _, f := range later.Failures {
		if f.Point.Dim != "" {
			points = append(points, f.Point)
		}
	}
	out.Failures = nil
	for _, f := range s.Failures {
		if !slices.ContainsFunc(points, f.of) && !slices.ContainsFunc(later.Failures, func(g SweepFailure) bool {
			return g.Point.Dim == "" && strings.SplitAfterN(g.Text, " ", 2)[0] == strings.SplitAfterN(f.Text, " ", 2)[0]
		}) {
			out.Failures = append(out.Failures, f)
		}
	}
	out.Failures = append(out.Failures, later.Failures...)
	slices.SortStableFunc(out.Runs, func(a, b SweepRun) int {
		if d := slices.Index(sweepDims, a.Point.Dim) - slices.Index(sweepDims, b.Point.Dim); d != 0 {
			return d
		}
		return cmp.Or(cmp.Compare(a.Point.X(), b.Point.X()), cmp.Compare(a.Point.BatchWindow, b.Point.BatchWindow))
	})
	out.Ended, out.LoadAfter = later.Ended, later.LoadAfter
	out.Command = s.Command + "; then " + later.Command
	if later.Commit != s.Commit {
		out.Commit = s.Commit + ", then " + later.Commit
	}
	return &out
}
