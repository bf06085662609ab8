package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/pool"
)

// SweepChartFile is the chart of one sweep dimension, beside the report.
func SweepChartFile(dim string) string { return "bench-sweep-" + dim + ".svg" }

// dims returns the dimensions the sweep ran, in sweepDims order.
func (s *Sweep) dims() []string {
	var out []string
	for _, d := range sweepDims {
		for _, r := range s.Runs {
			if r.Point.Dim == d {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// points returns dim's points in run order, each once.
func (s *Sweep) points(dim string) []SweepPoint {
	var out []SweepPoint
	for _, r := range s.Runs {
		if r.Point.Dim == dim && !slices.ContainsFunc(out, func(p SweepPoint) bool { return p.Label == r.Point.Label }) {
			out = append(out, r.Point)
		}
	}
	return out
}

// run returns consumer's run at dim's point label.
func (s *Sweep) run(dim, label, consumer string) (SweepRun, bool) {
	for _, r := range s.Runs {
		if r.Point.Dim == dim && r.Point.Label == label && r.Consumer == consumer {
			return r, true
		}
	}
	return SweepRun{}, false
}

// inFlight is the most messages the worker holds at concurrency conc on
// queues queues: the pool's default bound, from its receivers (each
// queue has its own).
func inFlight(conc, queues int) int {
	return pool.MaxInFlightFor(conc, queues*pool.ReceiversFor(conc, false))
}

func dimTitle(dim string) string {
	switch dim {
	case SweepGroups:
		return "message groups"
	case SweepSize:
		return "message size"
	case SweepQueues:
		return "queues per worker"
	case SweepBacklog:
		return "backlog (messages waiting)"
	case SweepEffect:
		return "effect duration"
	case SweepRelay:
		return "relay: message groups of the producers"
	case SweepRelayWriters:
		return fmt.Sprintf("relay: producers (over %d groups)", RelayWritersGroups)
	case SweepLambda:
		return "Lambda handler: batch size (FIFO)"
	case SweepLambdaStandard:
		return "Lambda handler: batch size (standard queue)"
	}
	return dim
}

// table is dim's rows: each consumer at each point, beside the
// hand-written consumer (or the direct producer) of the same point.
func (s *Sweep) table(dim string) *table {
	if isRelay(dim) {
		first := "groups"
		if dim == SweepRelayWriters {
			first = "producers"
		}
		t := &table{head: []string{first, "load (1 min) at start", "producer", "msg/s reaching SQS", "× direct", "msg/s written", "SQS req/msg", "DynamoDB req/msg", "WRU/msg", "write → SQS p50", "p99"}}
		for _, p := range s.points(dim) {
			direct, _ := s.run(dim, p.Label, RelayDirect)
			for _, mode := range []string{RelayDirect, RelayOutbox, RelayGroupBatch} {
				r, ok := s.run(dim, p.Label, mode)
				if !ok || r.Relay == nil {
					continue
				}
				x := r.Relay
				vs := "-"
				if mode != RelayDirect && direct.Relay != nil {
					vs = ratio(x.Rate, direct.Relay.Rate)
				}
				t.add(p.Label, load1(r.Load), relayName(mode), fmt.Sprintf("%.0f", x.Rate), vs, fmt.Sprintf("%.0f", x.Written/max(x.Seconds, 1e-9)),
					fmt.Sprintf("%.2f", perMessage(x.Window, "SQS")), fmt.Sprintf("%.2f", perMessage(x.Window, "DynamoDB")), fmt.Sprintf("%.1f", x.WriteUnits()), msOr(x.P50), msOr(x.P99))
			}
		}
		return t
	}
	t := &table{head: []string{dim, "load (1 min) at start", "consumer", "msg/s", "× hand-written", "model msg/s", "× model", "CPU µs/msg", "CPU × hand-written", "peak RSS MiB", "RSS − hand-written", "SQS req/msg", "WRU/msg", "receive → effect start", "paced msg/s", "send → effect p50", "p99", "prefill"}}
	if isLambda(dim) {
		t.head[0] = "batch (+ window)"
	}
	baseName, libName := sweepConsumers(dim)
	for _, p := range s.points(dim) {
		base, hasBase := s.run(dim, p.Label, baseName)
		for _, c := range []string{baseName, libName} {
			r, ok := s.run(dim, p.Label, c)
			if !ok {
				continue
			}
			d := r.Drain
			vsRate, vsCPU, vsRSS := "-", "-", "-"
			if c != baseName && hasBase {
				vsRate, vsCPU = ratio(d.Rate, base.Drain.Rate), ratio(d.CPUPerMessage(), base.Drain.CPUPerMessage())
				vsRSS = fmt.Sprintf("%+.0f", d.PeakRSS()-base.Drain.PeakRSS())
			}
			pace, p50, p99 := "-", "-", "-"
			if r.Paced != nil {
				pace, p50, p99 = fmt.Sprintf("%.0f", r.Paced.Rate), msf(r.Paced.P50), msf(r.Paced.P99)
			}
			t.add(p.Label, load1(r.Load), consumerName(c), fmt.Sprintf("%.0f", d.Rate), vsRate, fmt.Sprintf("%.0f", r.Model), ratio(d.Rate, r.Model),
				fmt.Sprintf("%.0f", d.CPUPerMessage()), vsCPU, fmt.Sprintf("%.0f", d.PeakRSS()), vsRSS,
				fmt.Sprintf("%.3f", d.PerMessage("SQS")), fmt.Sprintf("%.1f", d.WriteUnits()), msf(d.StartWait()), pace, p50, p99, fmt.Sprint(d.Prefill))
		}
	}
	return t
}

// load1 is the 1-minute load average of a /proc/loadavg reading.
func load1(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return "-"
}

// span returns the lowest and highest of f over dim's runs of consumer.
func (s *Sweep) span(dim, consumer string, f func(SweepRun) (float64, bool)) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range s.Runs {
		if r.Point.Dim != dim || r.Consumer != consumer {
			continue
		}
		if v, good := f(r); good {
			lo, hi, ok = min(lo, v), max(hi, v), true
		}
	}
	return lo, hi, ok
}

// vsBase is f of a worker run over f of the hand-written run at its point.
func (s *Sweep) vsBase(f func(Drain) float64) func(SweepRun) (float64, bool) {
	return func(r SweepRun) (float64, bool) {
		baseName, _ := sweepConsumers(r.Point.Dim)
		b, ok := s.run(r.Point.Dim, r.Point.Label, baseName)
		if !ok || f(b.Drain) <= 0 {
			return 0, false
		}
		return f(r.Drain) / f(b.Drain), true
	}
}

// Sentence is what dim's curve says, in one sentence from its numbers.
func (s *Sweep) Sentence(dim string) string {
	ps := s.points(dim)
	if len(ps) == 0 {
		return ""
	}
	first, last := ps[0].Label, ps[len(ps)-1].Label
	if isRelay(dim) {
		lo, hi, ok := s.span(dim, RelayOutbox, s.vsDirect)
		glo, ghi, gok := s.span(dim, RelayGroupBatch, s.vsDirect)
		if !ok || !gok {
			return ""
		}
		unit := "groups"
		if dim == SweepRelayWriters {
			unit = "producers"
		}
		line := fmt.Sprintf("From %s to %s %s the outbox with the relay's defaults delivers %.2f to %.2f× what a direct producer sends in the same run, with GroupBatch %.2f to %.2f×.", first, last, unit, lo, hi, glo, ghi)
		p99 := func(r SweepRun) (float64, bool) {
			if r.Relay == nil || r.Relay.P99 <= 0 {
				return 0, false
			}
			return float64(r.Relay.P99) / float64(time.Millisecond), true
		}
		if qlo, qhi, ok := s.span(dim, RelayOutbox, p99); ok {
			line += fmt.Sprintf(" Write → SQS p99: %.0f to %.0f ms", qlo, qhi)
			if dlo, dhi, ok := s.span(dim, RelayDirect, p99); ok {
				line += fmt.Sprintf(" (direct: %.0f to %.0f)", dlo, dhi)
			}
			line += "."
		}
		return line
	}
	// Points where the worker applied nothing in its window say so apart.
	_, lib := sweepConsumers(dim)
	who, base := "the worker", "the hand-written consumer"
	if isLambda(dim) {
		who, base = "the LambdaHandler", "the hand-written handler"
	}
	var measured, empty []string
	for _, p := range ps {
		if r, ok := s.run(dim, p.Label, lib); ok && r.Drain.Rate > 0 {
			measured = append(measured, p.Label)
		} else if ok {
			empty = append(empty, p.Label)
		}
	}
	if len(measured) == 0 {
		return ""
	}
	applied := func(f func(SweepRun) (float64, bool)) func(SweepRun) (float64, bool) {
		return func(r SweepRun) (float64, bool) {
			if r.Drain.Rate <= 0 {
				return 0, false
			}
			return f(r)
		}
	}
	rlo, rhi, rok := s.span(dim, lib, applied(s.vsBase(func(d Drain) float64 { return d.Rate })))
	mlo, mhi, _ := s.span(dim, lib, applied(func(r SweepRun) (float64, bool) { return r.Drain.Rate / r.Model, r.Model > 0 }))
	clo, chi, _ := s.span(dim, lib, applied(s.vsBase(Drain.CPUPerMessage)))
	line := fmt.Sprintf("From %s to %s %s %s runs at %.2f to %.2f× the model's rate", measured[0], measured[len(measured)-1], dimUnit(dim), who, mlo, mhi)
	if rok {
		line += fmt.Sprintf(" and %.2f to %.2f× %s's, with %.2f to %.2f× its CPU per message", rlo, rhi, base, clo, chi)
	}
	line += "."
	if len(empty) > 0 {
		line += fmt.Sprintf(" At %s %s it applied nothing in its window.", strings.Join(empty, ", "), dimUnit(dim))
	}
	return line + s.pacedSentence(dim, lib, base)
}

// pacedSentence is what dim's paced runs say, "" without any: the
// library's send → effect p50 and p99 over the points, against the
// hand-written consumer's at the same points.
func (s *Sweep) pacedSentence(dim, lib, base string) string {
	paced := func(f func(SweepPaced) time.Duration) func(SweepRun) (float64, bool) {
		return func(r SweepRun) (float64, bool) {
			if r.Paced == nil {
				return 0, false
			}
			return f(*r.Paced).Seconds() * 1000, true
		}
	}
	p99 := func(p SweepPaced) time.Duration { return p.P99 }
	baseName, _ := sweepConsumers(dim)
	qlo, qhi, ok := s.span(dim, lib, paced(p99))
	if !ok {
		return ""
	}
	line := fmt.Sprintf(" Its send → effect p99 is %.0f to %.0f ms", qlo, qhi)
	if blo, bhi, ok := s.span(dim, baseName, paced(p99)); ok {
		line += fmt.Sprintf(", %s's %.0f to %.0f", base, blo, bhi)
	}
	return line + "."
}

// paced reports whether any run of the sweep has a paced run.
func (s *Sweep) paced() bool {
	return slices.ContainsFunc(s.Runs, func(r SweepRun) bool { return r.Paced != nil })
}

// sweepWhy is the mechanism behind each dimension's curve, in a sentence
// or two; the reasoning and the figures behind it are in docs/TESTING.md's
// history of the curves.
var sweepWhy = map[string]string{
	SweepGroups: "One group is bound by its order (a receive, 10 commits in turn, a delete); from about 100 groups the concurrency is, and past 1,000 CPU and memory are flat. At few groups a paced message waits for its group's last delete, which the worker batches for up to its ack delay.",
	SweepSize:   "CPU grows with the body (the fake checks it, the ledger parses it, the worker also hashes it), and from 256 KiB it binds the rate, mostly the fake's; a 1 MiB point drains a 512-message backlog in under a second, so it is noisy.",
	SweepQueues: "Each queue has its own receivers, so 50 queues hold 100 long polls and up to " + fmt.Sprint(inFlight(DefaultSweepConc, 50)) +
		" messages: receives return fewer messages each, and SQS requests per message grow.",
	SweepBacklog:        "The backlog lives in the fake: both consumers' RSS grows with it alike, and the worker's difference stays within its in-flight bound.",
	SweepEffect:         "The worker's rate follows concurrency ÷ (commit + effect), what it holds beyond its handlers waiting with its visibility extended; the hand-written consumer's batch of 10-second effects in turn would outlive its visibility timeout.",
	SweepRelay:          "By default a hot group moves one message per SQS round trip; `GroupBatch` sends up to 10 of its messages in one request, in order. A round carries many groups; where the relay falls behind, write → SQS grows with the backlog.",
	SweepRelayWriters:   "The producers set the pace up to 16; at 64 one relay falls behind, at its ceiling of `Relay.Concurrency` groups at once (32 by default, `--concurrency`).",
	SweepLambda:         "A FIFO receive hands a group's waiting messages together, so a batch is mostly one group and the LambdaHandler's parallel lanes overlap little; what it pays is CPU, for its dedup record.",
	SweepLambdaStandard: "On a standard queue every record is its own lane: the LambdaHandler commits a batch of 10 at once, the hand-written handler in turn.",
}

func (s *Sweep) vsDirect(r SweepRun) (float64, bool) {
	d, ok := s.run(r.Point.Dim, r.Point.Label, RelayDirect)
	if !ok || r.Relay == nil || d.Relay == nil || d.Relay.Rate <= 0 {
		return 0, false
	}
	return r.Relay.Rate / d.Relay.Rate, true
}

func dimUnit(dim string) string {
	switch dim {
	case SweepGroups:
		return "groups"
	case SweepQueues:
		return "queues"
	case SweepBacklog:
		return "messages waiting"
	case SweepSize:
		return "bodies"
	case SweepEffect:
		return "effects"
	case SweepLambda, SweepLambdaStandard:
		return "messages a batch"
	}
	return dim
}

// writeSweepText prints the sweep's tables.
func writeSweepText(w io.Writer, s *Sweep) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "Sweep, aws-like latency, concurrency %d (load average %s at start, %s at end):\n", s.Conc, s.LoadBefore, s.LoadAfter)
	for _, dim := range s.dims() {
		fmt.Fprintf(w, "\n%s:\n", dimTitle(dim))
		s.table(dim).text(w)
		if line := s.Sentence(dim); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	for _, f := range s.Failures {
		fmt.Fprintln(w, "FAILED, left out: "+f.Text)
	}
	fmt.Fprintln(w)
}

// sweepMarkdown is the report's section of curves.
func sweepMarkdown(b *strings.Builder, s *Sweep) {
	if s == nil || len(s.Runs) == 0 {
		return
	}
	b.WriteString("## Curves: cost as work grows (aws-like latency)\n\n")
	fmt.Fprintf(b, "One dimension at a time from the main point (%d groups, 50 B bodies, one queue, no effect wait), at concurrency %d, beside the hand-written consumer (or a direct producer) in the same run. ", DefaultFakeGroups, s.Conc)
	fmt.Fprintf(b, "One round of a %s warm-up and a %s window: a point is good to about 15 %%. Model msg/s is what the latency allows", s.Warmup, s.Window)
	if s.paced() {
		fmt.Fprintf(b, "; send → effect is a second run paced at %.0f %% of the slower drain, or of what a group moves one message at a time", 100*PacedShare)
	}
	fmt.Fprintf(b, ". The worker holds at most %d messages at concurrency %d on one queue (%d on 50): that times the body bounds what its memory adds. ", inFlight(s.Conc, 1), s.Conc, inFlight(s.Conc, 50))
	fmt.Fprintf(b, "Measured %s from `%s` by `%s`.\n\n", timeSpan(s.Started, s.Ended), s.Commit, s.Command)
	for _, dim := range s.dims() {
		fmt.Fprintf(b, "### %s\n\n", strings.ToUpper(dimTitle(dim)[:1])+dimTitle(dim)[1:])
		s.table(dim).markdown(b)
		fmt.Fprintf(b, "\n![%s](%s)\n\n", dimTitle(dim), SweepChartFile(dim))
		line := strings.TrimSpace(s.Sentence(dim) + " " + sweepWhy[dim])
		if line != "" {
			b.WriteString(line + "\n\n")
		}
	}
	if len(s.Failures) > 0 {
		b.WriteString("Points left out:\n\n")
		for _, f := range s.Failures {
			b.WriteString("- " + f.Text + "\n")
		}
		b.WriteString("\n")
	}
}

// curveSeries is one line of a panel: ys by point index (NaN: none).
type curveSeries struct {
	name   string
	color  string
	dashed bool
	ys     []float64
}

type curvePanel struct {
	title  string
	series []curveSeries
}

// any reports whether any series of p has a value.
func (p curvePanel) any() bool {
	for _, c := range p.series {
		if slices.ContainsFunc(c.ys, func(y float64) bool { return !math.IsNaN(y) }) {
			return true
		}
	}
	return false
}

// SweepCharts draws each dimension's curves: one SVG per dimension, its
// panels side by side over the points.
func SweepCharts(s *Sweep) map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for _, dim := range s.dims() {
		ps := s.points(dim)
		xs := make([]string, len(ps))
		for i, p := range ps {
			xs[i] = p.Label
		}
		at := func(consumer string, f func(SweepRun) float64) []float64 {
			ys := make([]float64, len(ps))
			for i, p := range ps {
				ys[i] = math.NaN()
				if r, ok := s.run(dim, p.Label, consumer); ok {
					ys[i] = f(r)
				}
			}
			return ys
		}
		var panels []curvePanel
		if isRelay(dim) {
			rel := func(f func(RelayRun) float64) func(SweepRun) float64 {
				return func(r SweepRun) float64 {
					if r.Relay == nil {
						return math.NaN()
					}
					return f(*r.Relay)
				}
			}
			three := func(f func(RelayRun) float64) []curveSeries {
				return []curveSeries{
					{name: "direct producer", color: "#7f7f7f", dashed: true, ys: at(RelayDirect, rel(f))},
					{name: "outbox + relay (defaults)", color: "#1f77b4", ys: at(RelayOutbox, rel(f))},
					{name: "outbox + relay (GroupBatch)", color: "#ff7f0e", ys: at(RelayGroupBatch, rel(f))},
				}
			}
			panels = []curvePanel{
				{"msg/s reaching SQS", three(func(x RelayRun) float64 { return x.Rate })},
				{"SQS requests/msg", three(func(x RelayRun) float64 { return perMessage(x.Window, "SQS") })},
				{"DynamoDB requests/msg", three(func(x RelayRun) float64 { return perMessage(x.Window, "DynamoDB") })},
				{"write units/msg", three(RelayRun.WriteUnits)},
			}
			// Runs measured before the relay's write → SQS times have none.
			if latency := (curvePanel{"write → SQS p99, ms", three(func(x RelayRun) float64 {
				if x.P99 == 0 {
					return math.NaN()
				}
				return float64(x.P99) / float64(time.Millisecond)
			})}); latency.any() {
				panels = append(panels, latency)
			}
		} else {
			base, lib := sweepConsumers(dim)
			baseLabel, libLabel := "hand-written", "worker"
			if isLambda(dim) {
				baseLabel, libLabel = "hand-written handler", "LambdaHandler"
			}
			two := func(f func(Drain) float64) []curveSeries {
				return []curveSeries{
					{name: baseLabel, color: "#7f7f7f", dashed: true, ys: at(base, func(r SweepRun) float64 { return f(r.Drain) })},
					{name: libLabel, color: "#1f77b4", ys: at(lib, func(r SweepRun) float64 { return f(r.Drain) })},
				}
			}
			rate := append(two(func(d Drain) float64 { return d.Rate }),
				curveSeries{name: libLabel + "'s model", color: "#2ca02c", dashed: true, ys: at(lib, func(r SweepRun) float64 { return r.Model })})
			panels = []curvePanel{
				{"messages/s", rate},
				{"CPU µs/msg", two(Drain.CPUPerMessage)},
				{"peak RSS, MiB", two(Drain.PeakRSS)},
				{"SQS requests/msg", two(func(d Drain) float64 { return d.PerMessage("SQS") })},
			}
			if slices.ContainsFunc(s.Runs, func(r SweepRun) bool { return r.Point.Dim == dim && r.Paced != nil }) {
				ms := func(consumer string, f func(SweepPaced) time.Duration) []float64 {
					return at(consumer, func(r SweepRun) float64 {
						if r.Paced == nil {
							return math.NaN()
						}
						return f(*r.Paced).Seconds() * 1000
					})
				}
				p50 := func(p SweepPaced) time.Duration { return p.P50 }
				p99 := func(p SweepPaced) time.Duration { return p.P99 }
				panels = append(panels, curvePanel{fmt.Sprintf("send → effect, ms (paced at %.0f %%)", 100*PacedShare), []curveSeries{
					{name: baseLabel + " p50", color: "#7f7f7f", dashed: true, ys: ms(base, p50)},
					{name: baseLabel + " p99", color: "#c7c7c7", dashed: true, ys: ms(base, p99)},
					{name: libLabel + " p50", color: "#1f77b4", ys: ms(lib, p50)},
					{name: libLabel + " p99", color: "#9467bd", ys: ms(lib, p99)},
				}})
			}
		}
		from, to := s.dimLoads(dim)
		out[dim] = curveChart(fmt.Sprintf("%s, aws-like latency, concurrency %d (load %s → %s)", dimTitle(dim), s.Conc, from, to), dimTitle(dim), xs, panels)
	}
	return out
}

// dimLoads are the 1-minute load averages as dim's first and last runs
// started: a merged sweep's own (LoadBefore, LoadAfter) span other runs.
// Runs without a reading: the sweep's.
func (s *Sweep) dimLoads(dim string) (from, to string) {
	from, to = load1(s.LoadBefore), load1(s.LoadAfter)
	var loads []string
	for _, r := range s.Runs {
		if r.Point.Dim == dim && r.Load != "" {
			loads = append(loads, load1(r.Load))
		}
	}
	if len(loads) > 0 {
		from, to = loads[0], loads[len(loads)-1]
	}
	return from, to
}

// curveChart draws panels side by side, each with its own y scale from
// zero, over the same categorical x axis.
func curveChart(title, xTitle string, xs []string, panels []curvePanel) string {
	const (
		panelW, height           = 290, 400
		left, right, top, bottom = 58, 16, 60, 130
	)
	width := len(panels)*panelW + 10
	plotW, plotH := float64(panelW-left-right), float64(height-top-bottom)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for pi, p := range panels {
		x0 := float64(pi * panelW)
		ymax := 0.0
		for _, s := range p.series {
			for _, v := range s.ys {
				if !math.IsNaN(v) {
					ymax = max(ymax, v)
				}
			}
		}
		ymax = niceScale(ymax)
		x := func(i int) float64 {
			if len(xs) <= 1 {
				return x0 + float64(left) + plotW/2
			}
			return x0 + float64(left) + 12 + float64(i)*(plotW-24)/float64(len(xs)-1)
		}
		y := func(v float64) float64 { return float64(top) + plotH*(1-v/ymax) }
		fmt.Fprintf(&b, `<text x="%.1f" y="46" font-weight="bold">%s</text>`+"\n", x0+float64(left), html.EscapeString(p.title))
		for i := 0; i <= 4; i++ {
			v := ymax * float64(i) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", x0+float64(left), y(v), x0+float64(left)+plotW, y(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", x0+float64(left)-5, y(v)+4, tick(v))
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", x0+float64(left), top, x0+float64(left), float64(top)+plotH)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", x0+float64(left), float64(top)+plotH, x0+float64(left)+plotW, float64(top)+plotH)
		for i, l := range xs {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x(i), float64(top)+plotH+16, html.EscapeString(l))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+float64(left)+plotW/2, float64(top)+plotH+32, html.EscapeString(xTitle))
		for si, s := range p.series {
			dash := ""
			if s.dashed {
				dash = ` stroke-dasharray="5 4"`
			}
			var pts []string
			for i, v := range s.ys {
				if !math.IsNaN(v) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
				}
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
			for i, v := range s.ys {
				if !math.IsNaN(v) {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s at %s: %s</title></circle>`+"\n", x(i), y(v), s.color, html.EscapeString(s.name), html.EscapeString(xs[i]), tick(v))
				}
			}
			ly := float64(top) + plotH + 52 + float64(si)*16
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x0+float64(left), ly, x0+float64(left)+20, ly, s.color, dash)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+float64(left)+26, ly+4, html.EscapeString(s.name))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceScale is niceMax for values that may be below 10 (requests per
// message): 1, 2 or 5 times a power of ten at or above v.
func niceScale(v float64) float64 {
	if v >= 10 {
		return niceMax(v)
	}
	if v <= 0 {
		return 1
	}
	return roundUp125(v * 1.05)
}

func tick(v float64) string {
	switch {
	case v == 0 || math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
