package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ops returns the operations requested in any run, SQS first.
func ops(samples []Sample) []string {
	seen := map[string]bool{}
	for _, s := range samples {
		for k, v := range s.Requests {
			if v > 0 {
				seen[k] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int {
		ra, rb := strings.HasPrefix(a, "SQS."), strings.HasPrefix(b, "SQS.")
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

func (r *Result) windows() []Sample {
	var ss []Sample
	for _, d := range r.Drains() {
		ss = append(ss, d.Window)
	}
	for _, p := range r.Latency {
		ss = append(ss, p.Window)
	}
	return ss
}

// baselineRate returns the baseline's rate at conc in regime, or 0.
func (r *Result) baselineRate(regime string, conc int) float64 {
	for _, d := range r.Drains() {
		if d.Consumer == "baseline" && d.Conc == conc && d.regime() == regime {
			return d.Rate
		}
	}
	return 0
}

func (r *Result) find(consumer string, procs, conc int) (Drain, bool) {
	for _, d := range r.Drains() {
		if d.Consumer == consumer && d.Procs == procs && d.Conc == conc && d.regime() == RegimeEmulator {
			return d, true
		}
	}
	return Drain{}, false
}

func (r *Result) best(consumer string) (Drain, bool) {
	var b Drain
	ok := false
	for _, d := range r.Drains() {
		if d.Consumer == consumer && d.regime() == RegimeEmulator && (!ok || d.Rate > b.Rate) {
			b, ok = d, true
		}
	}
	return b, ok
}

func label(consumer string, procs int) string {
	if consumer == "baseline" {
		return "hand-written"
	}
	if mode, ok := strings.CutPrefix(consumer, "worker/"); ok {
		return fmt.Sprintf("worker ×%d (%s)", procs, mode)
	}
	if procs == 1 {
		return "worker ×1"
	}
	return fmt.Sprintf("worker ×%d", procs)
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// perReceive is messages per ReceiveMessage request.
func (r Drain) perReceive() string {
	n := r.Window.Requests["SQS.ReceiveMessage"]
	if n <= 0 || r.Window.Counts["received"] <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.Window.Counts["received"]/n)
}

func perBatch(perMsg float64) string {
	if perMsg <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 1/perMsg)
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// table is rows of cells rendered as aligned text or Markdown.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) text(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}

func (t *table) markdown(b *strings.Builder) {
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for i := range t.head {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}

func (r *Result) limitsTable() *table {
	t := &table{head: []string{"limit (measured in this run)"}}
	for i := range r.Limits {
		switch {
		case i == 0:
			t.head = append(t.head, "start")
		case i == len(r.Limits)-1:
			t.head = append(t.head, "end")
		default:
			t.head = append(t.head, fmt.Sprintf("after round %d", i))
		}
	}
	if len(r.Limits) > 1 {
		t.head = append(t.head, "mean")
	}
	mean := r.MeanLimits()
	row := func(name string, f func(Limits) float64) {
		cells := []string{name}
		for _, l := range r.Limits {
			cells = append(cells, fmt.Sprintf("%.0f", f(l)))
		}
		if len(r.Limits) > 1 {
			cells = append(cells, fmt.Sprintf("%.0f", f(mean)))
		}
		t.add(cells...)
	}
	first := r.first()
	c := joinInts(r.Config.LimitConcurrency, ", ")
	row(fmt.Sprintf("SQS ReceiveMessage(10) + DeleteMessageBatch, msg/s (best of %s-way)", c), func(l Limits) float64 { return l.SQS })
	row(fmt.Sprintf("DynamoDB conditional PutItem, puts/s (best of %s-way)", c), func(l Limits) float64 { return l.Put })
	row(fmt.Sprintf("  ÷ %s per message, msg/s", writes(first.WritesPerMessage, "DynamoDB write")), func(l Limits) float64 { return l.Put / float64(l.WritesPerMessage) })
	row(fmt.Sprintf("limit = the lower of the two, msg/s (set by %s)", first.By()), Limits.Limit)
	path := "claim + commit"
	if r.Config.Commit == "optimistic" {
		path = "one optimistic commit"
	}
	row(fmt.Sprintf("for reference: the worker's DynamoDB path alone (%s), msg/s (best of %s-way)", path, c), func(l Limits) float64 { return l.Path })
	return t
}

// throughputTable is the saturated runs of regime: rate, its ratio to the
// hand-written consumer, requests, write units, CPU and memory per message.
func (r *Result) throughputTable(regime string) *table {
	emu := regime == RegimeEmulator
	t := &table{head: []string{"consumer", "conc/proc", "msg/s"}}
	if r.Config.Rounds > 1 {
		t.head = append(t.head, "rounds: min-max msg/s")
	}
	if emu {
		t.head = append(t.head, "share of limit")
	}
	t.head = append(t.head, "× hand-written (same conc)", "SQS req/msg", "× floor", "DynamoDB req/msg", "WRU/msg", "CPU µs/msg", "CPU cores", "peak RSS MiB", "msgs/receive", "msgs/delete batch")
	loads := r.loadsKept(regime)
	if loads {
		t.head = append(t.head, "load (1 min) at start")
	}
	for _, d := range r.Drains() {
		if d.regime() != regime {
			continue
		}
		vs := "-"
		if d.Consumer != "baseline" {
			vs = ratio(d.Rate, r.baselineRate(regime, d.Conc))
		}
		cells := []string{label(d.Consumer, d.Procs), fmt.Sprint(d.Conc), fmt.Sprintf("%.0f", d.Rate)}
		if r.Config.Rounds > 1 {
			cells = append(cells, fmt.Sprintf("%.0f-%.0f", d.MinRate, d.MaxRate))
		}
		if emu {
			cells = append(cells, fmt.Sprintf("%.0f%%", 100*d.Share()))
		}
		t.add(append(cells, vs, fmt.Sprintf("%.3f", d.PerMessage("SQS")), ratio(d.PerMessage("SQS"), SQSFloor), fmt.Sprintf("%.3f", d.PerMessage("DynamoDB")),
			orDash("%.2f", d.WriteUnits()), orDash("%.0f", d.CPUPerMessage()), orDash("%.2f", d.CPUBusy()), orDash("%.0f", d.PeakRSS()),
			d.perReceive(), perBatch(d.Op("SQS.DeleteMessageBatch")))...)
		if loads {
			t.rows[len(t.rows)-1] = append(t.rows[len(t.rows)-1], load1(d.Load))
		}
	}
	return t
}

// loadsKept reports whether any run of regime kept the machine's load.
func (r *Result) loadsKept(regime string) bool {
	for _, d := range r.Runs {
		if d.regime() == regime && d.Load != "" {
			return true
		}
	}
	return false
}

// orDash formats v, or "-" for 0 (not measured).
func orDash(format string, v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func (r *Result) first() Limits {
	if len(r.Limits) == 0 {
		return Limits{}
	}
	return r.Limits[0]
}

func (r *Result) opsTable() *table {
	cols := ops(r.windows())
	t := &table{head: append([]string{"run", "conc/proc"}, cols...)}
	addRow := func(name string, conc int, s Sample) {
		cells := []string{name, fmt.Sprint(conc)}
		n := s.Counts["applied"]
		for _, op := range cols {
			if n <= 0 || s.Requests[op] == 0 {
				cells = append(cells, "-")
			} else {
				cells = append(cells, fmt.Sprintf("%.3f", s.Requests[op]/n))
			}
		}
		t.add(cells...)
	}
	for _, d := range r.Drains() {
		addRow(label(d.Consumer, d.Procs)+", saturated, "+regimeName(d.regime()), d.Conc, d.Window)
	}
	for _, p := range r.Latency {
		addRow(label(p.Consumer, p.Procs)+fmt.Sprintf(", paced %.0f msg/s", p.Offered), p.Conc, p.Window)
	}
	return t
}

func (r *Result) latencyTable() *table {
	t := &table{head: []string{"consumer", "conc/proc", "offered msg/s", "messages", "p50", "p99", "max", "SQS req/msg", "DynamoDB req/msg"}}
	for _, p := range r.Latency {
		t.add(label(p.Consumer, p.Procs), fmt.Sprint(p.Conc), fmt.Sprintf("%.0f", p.Offered), fmt.Sprint(p.Messages),
			ms(p.P50), ms(p.P99), ms(p.Max), fmt.Sprintf("%.3f", perMessage(p.Window, "SQS")), fmt.Sprintf("%.3f", perMessage(p.Window, "DynamoDB")))
	}
	return t
}

// WriteText prints the tables.
func WriteText(w io.Writer, r *Result) {
	fmt.Fprintf(w, "Benchmark, effect %s, %s (load average %s at start, %s at end)\n\n",
		r.Config.Effect, r.Started.UTC().Format(time.RFC3339), r.LoadBefore, r.LoadAfter)
	if len(r.Runs) == 0 && len(r.Relay) == 0 && r.Sweep != nil {
		writeSweepText(w, r.Sweep)
		return
	}
	if ts := r.Targets(); len(ts) > 0 {
		fmt.Fprintln(w, "Targets of issue 22 (same-run ratios):")
		r.targetsTable().text(w)
		fmt.Fprintln(w)
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "FAILED, left out: "+f)
	}
	if len(r.Limits) > 0 {
		r.limitsTable().text(w)
		fmt.Fprintln(w)
	}
	for _, g := range r.regimes() {
		fmt.Fprintf(w, "Saturated runs, %s (pre-filled queue; %s window after %s warm-up):\n", regimeName(g), r.Config.Window, r.Config.Warmup)
		r.throughputTable(g).text(w)
		fmt.Fprintln(w)
	}
	if st := r.statesTable(); len(st.rows) > 0 {
		fmt.Fprintln(w, "Where a message's time goes, aws-like latency:")
		st.text(w)
		fmt.Fprintln(w)
	}
	if len(r.HotGroup) > 0 {
		fmt.Fprintln(w, "One hot FIFO group, aws-like latency:")
		r.hotGroupTable().text(w)
		fmt.Fprintln(w)
	}
	if len(r.Relay) > 0 {
		fmt.Fprintln(w, "The relay against a direct producer, aws-like latency:")
		r.relayTable().text(w)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Requests per message by operation:")
	r.opsTable().text(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Budget per message, and the modelled AWS cost of a million messages (on demand, us-east-1):")
	r.budgetTable().text(w)
	if len(r.Latency) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Send-to-effect latency (paced producer):")
		r.latencyTable().text(w)
	}
	fmt.Fprintln(w)
	writeSweepText(w, r.Sweep)
	for _, f := range r.Findings() {
		fmt.Fprintln(w, "- "+f)
	}
}

// Findings are the claims the numbers support, as ratios measured in this run.
func (r *Result) Findings() []string {
	var out []string
	limit := r.Limit()
	if limit <= 0 {
		return nil
	}
	m := r.MeanLimits()
	perMsg := m.Put / float64(max(m.WritesPerMessage, 1))
	f := fmt.Sprintf("The limit is set by %s: %.0f conditional puts/s ÷ %s a message = %.0f msg/s (SQS: %.0f)",
		r.first().By(), m.Put, writes(m.WritesPerMessage, "write"), perMsg, m.SQS)
	if n := len(r.Limits); n > 1 {
		lo, hi := limit, limit
		for _, l := range r.Limits {
			lo, hi = min(lo, l.Limit()), max(hi, l.Limit())
		}
		f += fmt.Sprintf(", %.0f-%.0f over %d measurements", lo, hi, n)
	}
	out = append(out, f+".")
	if w, ok := r.best("worker"); ok {
		f := fmt.Sprintf("Best worker run: %s at concurrency %d, %.0f msg/s = %.0f%% of the limit", label("worker", w.Procs), w.Conc, w.Rate, 100*w.Share())
		if m.Path > 0 {
			// Both as shares of the limit, which moved during the run.
			of := w.Share() * limit / m.Path
			f += fmt.Sprintf(" and %.0f%% of what its DynamoDB calls reach alone", 100*of)
			if of >= 0.8 {
				f += ": DynamoDB Local binds it, not SQS or the pool"
			}
		}
		if k, _, _, ok := r.commitCost(); ok {
			f += fmt.Sprintf(" (a commit costs it about %.1f puts)", k)
		}
		out = append(out, f+".")
		if bl, ok := r.best("baseline"); ok {
			out = append(out, fmt.Sprintf("It does %s× the best hand-written run (concurrency %d, %.0f msg/s), which is only at-least-once.",
				ratio(w.Rate, bl.Rate), bl.Conc, bl.Rate))
		}
	}
	if len(r.Config.Procs) > 1 {
		conc := slices.Max(r.Config.Concurrency)
		if one, ok := r.find("worker", 1, conc); ok && one.Rate > 0 {
			var parts []string
			for _, p := range r.Config.Procs {
				if d, ok := r.find("worker", p, conc); ok && p != 1 {
					parts = append(parts, fmt.Sprintf("%d processes %.2f×", p, d.Rate/one.Rate))
				}
			}
			if len(parts) > 0 {
				out = append(out, fmt.Sprintf("Scaling at concurrency %d per process, relative to one process: %s.", conc, strings.Join(parts, ", ")))
			}
		}
	}
	if s, ok := r.steadySQS(); ok {
		op, v := dominant(s.Window, "SQS.")
		verdict := "within"
		if s.PerMessage("SQS") > 0.25 {
			verdict = "above"
		}
		out = append(out, fmt.Sprintf("SQS requests per message at steady load (%s, concurrency %d): %.3f, %s the 0.25 target (%s %.3f); %s messages a receive, %s a delete batch.",
			label("worker", s.Procs), s.Conc, s.PerMessage("SQS"), verdict, strings.TrimPrefix(op, "SQS."), v, s.perReceive(), perBatch(s.Op("SQS.DeleteMessageBatch"))))
	}
	return out
}

// commitCost is what one commit costs DynamoDB Local in conditional puts,
// from each limit measurement (put rate ÷ path rate − 1, both measured
// together): the median and range.
func (r *Result) commitCost() (med, lo, hi float64, ok bool) {
	var ks []float64
	for _, l := range r.Limits {
		if l.Path > 0 && l.Put > l.Path {
			ks = append(ks, l.Put/l.Path-1)
		}
	}
	if len(ks) == 0 {
		return 0, 0, 0, false
	}
	slices.Sort(ks)
	return ks[(len(ks)-1)/2], ks[0], ks[len(ks)-1], true
}

// steadySQS is the single-process worker run with the highest rate.
func (r *Result) steadySQS() (Drain, bool) {
	var b Drain
	ok := false
	for _, d := range r.Drains() {
		if d.Consumer == "worker" && d.Procs == 1 && d.regime() == RegimeEmulator && (!ok || d.Rate > b.Rate) {
			b, ok = d, true
		}
	}
	return b, ok
}

// dominant returns the operation with prefix that has the most requests per
// message.
func dominant(s Sample, prefix string) (string, float64) {
	n := s.Counts["applied"]
	best, v := "", 0.0
	// In name order, the first of equals wins: a page rendered twice from
	// one results file is the same page.
	for _, k := range slices.Sorted(maps.Keys(s.Requests)) {
		if c := s.Requests[k]; strings.HasPrefix(k, prefix) && n > 0 && c/n > v {
			best, v = k, c/n
		}
	}
	return best, v
}

func joinInts(vs []int, sep string) string {
	ss := make([]string, len(vs))
	for i, v := range vs {
		ss[i] = fmt.Sprint(v)
	}
	return strings.Join(ss, sep)
}

// times says how many times: once, twice, 3 times.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// writes counts n of a noun: "1 write", "2 writes".
func writes(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
