package bench

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/pool"
)

// SQSFloor is SQS requests per message of a plain drain: one
// ReceiveMessage of 10 and one DeleteMessageBatch of 10.
const SQSFloor = 0.2

// Bounds of issue 22's targets, as same-run ratios.
const (
	TargetOptimistic = 1.0  // ledger effect, optimistic, rate × the hand-written consumer's, aws regime
	TargetGrouped    = 1.2  // the same with group commit
	TargetSQS        = 1.1  // SQS requests per message × SQSFloor, every run
	TargetCPU        = 1.5  // CPU per message × the hand-written consumer's
	TargetWriteUnits = 1.05 // the bill per message (SQS requests and write units at AWS's prices) × the hand-written consumer's
	TargetRelay      = 0.5  // relay's rate × the direct producer's
)

// Target is one of the targets checked against this run.
type Target struct {
	Name   string  // what is compared, e.g. "rate × hand-written"
	Run    string  // which run: regime, consumer, concurrency
	Value  float64 // the measured ratio (or value)
	Bound  float64
	AtMost bool // holds if Value <= Bound; otherwise if Value >= Bound
	// Missing: a run it needs did not happen (or measured nothing, or
	// what it measured cannot be compared: Note says why).
	Missing bool
	Note    string
	// Reference, when set, says why this row is shown beside a target
	// rather than as one: it is not judged, and not counted.
	Reference string
	// Load is the 1-minute load average as each run it compares began,
	// "1.54/1.60" for two runs: the machine's load beside the figure.
	Load string
}

// Holds reports whether the target holds.
func (t Target) Holds() bool {
	if t.Missing {
		return false
	}
	if t.AtMost {
		return t.Value <= t.Bound
	}
	return t.Value >= t.Bound
}

// Verdict is "holds", "does not hold" or "not measured".
func (t Target) Verdict() string {
	switch {
	case t.Reference != "":
		return "reference: " + t.Reference
	case t.Missing && t.Note != "":
		return "not measured: " + t.Note
	case t.Missing:
		return "not measured"
	case t.Holds():
		return "holds"
	}
	return "does not hold"
}

func (t Target) bound() string {
	if t.AtMost {
		return fmt.Sprintf("<= %.2f", t.Bound)
	}
	return fmt.Sprintf(">= %.2f", t.Bound)
}

// findIn returns the merged run of consumer at conc in regime, procs 1.
func (r *Result) findIn(regime, consumer string, conc int) (Drain, bool) {
	for _, d := range r.Drains() {
		if d.regime() == regime && d.Consumer == consumer && d.Procs == 1 && d.Conc == conc {
			return d, true
		}
	}
	return Drain{}, false
}

// vsBaseline is the target value(d) ÷ value(hand-written) at the same
// regime and concurrency.
func (r *Result) vsBaseline(name, regime, consumer string, conc int, bound float64, atMost bool, value func(Drain) float64) Target {
	t := Target{Name: name, Run: fmt.Sprintf("%s, %s, concurrency %d", regimeName(regime), consumerName(consumer), conc), Bound: bound, AtMost: atMost}
	d, ok1 := r.findIn(regime, consumer, conc)
	b, ok2 := r.findIn(regime, "baseline", conc)
	if !ok1 || !ok2 || value(b) <= 0 || value(d) <= 0 {
		t.Missing = true
		return t
	}
	t.Value = value(d) / value(b)
	t.Load = loads(d.Load, b.Load)
	return t
}

// loads is the 1-minute load averages of /proc/loadavg readings, "/"
// between them, as a target's row prints them.
func loads(readings ...string) string {
	out := make([]string, 0, len(readings))
	for _, l := range readings {
		out = append(out, load1(l))
	}
	return strings.Join(out, "/")
}

// Targets checks every target of issue 22 the run measured: one line per
// run it applies to.
func (r *Result) Targets() []Target {
	var out []Target
	rate := func(d Drain) float64 { return d.Rate }
	cpu := func(d Drain) float64 { return d.CPUPerMessage() }
	bill := func(d Drain) float64 {
		b, ok := d.Window.Budget()
		if !ok {
			return 0
		}
		s, db := b.PerMillion()
		return s + db
	}
	regimes := r.regimes()
	has := func(g string) bool {
		for _, x := range regimes {
			if x == g {
				return true
			}
		}
		return false
	}
	concs := r.Config.Concurrency
	if has(RegimeAWS) {
		for _, c := range concs {
			out = append(out, r.vsBaseline("rate × hand-written", RegimeAWS, "worker", c, TargetOptimistic, false, rate))
		}
		for _, c := range concs {
			out = append(out, r.vsBaseline("rate × hand-written", RegimeAWS, "worker/grouped", c, TargetGrouped, false, rate))
		}
		for _, c := range concs {
			if _, ok := r.findIn(RegimeAWS, "worker/carried", c); ok {
				out = append(out, r.vsBaseline("rate × hand-written", RegimeAWS, "worker/carried", c, TargetOptimistic, false, rate))
			}
		}
	}
	for _, g := range regimes {
		for _, c := range concs {
			for _, w := range workerModes {
				d, ok := r.findIn(g, w, c)
				if !ok {
					continue
				}
				t := Target{Name: "SQS requests/msg × the receive-10/delete-batch floor", Bound: TargetSQS, AtMost: true,
					Run: fmt.Sprintf("%s, %s, concurrency %d", regimeName(g), consumerName(w), c)}
				v := d.PerMessage("SQS")
				t.Load = loads(d.Load)
				switch del := d.Op("SQS.DeleteMessageBatch"); {
				case del > 0 && 1/del > 10.5:
					// A batch holds at most 10: the effects outran the
					// deletes, whose requests fall after the window.
					t.Missing, t.Note = true, fmt.Sprintf("the deletes fell behind the effects (%.0f%% of the messages applied in the window deleted)", 100*10*del)
					t.Value = v / SQSFloor
				case v > 0:
					t.Value = v / SQSFloor
				default:
					t.Missing = true
				}
				out = append(out, t)
			}
		}
	}
	if has(RegimeEmulator) {
		for _, c := range concs {
			out = append(out, r.vsBaseline("CPU/msg × hand-written (both through the SDK)", RegimeEmulator, "worker", c, TargetCPU, true, cpu))
		}
	}
	// Write units do not depend on the regime, but an overloaded emulator
	// times requests out and the SDK's retries find their first attempt
	// committed: the aws regime's are the clean count.
	wruRegime := RegimeEmulator
	if has(RegimeAWS) {
		wruRegime = RegimeAWS
	}
	for _, c := range concs {
		out = append(out, r.vsBaseline("the bill per message (SQS requests + DynamoDB write units) × hand-written, cheapest mode", wruRegime, r.cheapest(wruRegime, c, bill), c, TargetWriteUnits, true, bill))
	}
	var hand Drain
	for _, d := range r.HotGroup {
		if d.Consumer == "baseline" {
			hand = d
		}
	}
	for _, d := range r.HotGroup {
		if d.Consumer == "baseline" {
			continue
		}
		t := Target{Name: "a hot FIFO group's wait for its next message − hand-written's, ms (bound: the ack delay)", AtMost: true,
			Run: fmt.Sprintf("aws-like latency, %s, one group, concurrency %d", consumerName(d.Consumer), d.Conc), Bound: float64(pool.DefaultAckDelay) / float64(time.Millisecond)}
		if d.GroupWait() > 0 && hand.GroupWait() > 0 {
			t.Value = float64(d.GroupWait()-hand.GroupWait()) / float64(time.Millisecond)
			t.Load = loads(d.Load, hand.Load)
		} else {
			t.Missing = true
		}
		out = append(out, t)
	}
	for _, rl := range r.Relay {
		if rl.Mode == RelayDirect || rl.Mode == RelayBacklog || rl.Mode == RelayBacklogGroupBatch || rl.Mode == RelayGroupBatchAlone {
			continue // the backlog runs measure the relay alone: no producer to compare
		}
		t := Target{Name: "relay rate × direct producer", Run: fmt.Sprintf("aws-like latency, %d group(s), %d writers", rl.Groups, rl.Writers), Bound: TargetRelay}
		switch {
		case rl.Mode == RelayGroupBatch:
			t.Run += fmt.Sprintf(", GroupBatch %d, PerGroup %d", RelayGroupBatchSize, RelayGroupBatchPerGroup)
		case rl.Groups == 1:
			// One message of a group per SendMessageBatch is the default's
			// order guarantee, which no SQS answer can break; a hot group
			// is what GroupBatch is for, and the target is its row.
			t.Reference = "the default relay moves a group one message per SQS round trip, its unconditional order guarantee (docs/OUTBOX.md); a hot group's target is the GroupBatch row"
		}
		if d, ok := r.relayRun(RelayDirect, rl.Groups); ok && d.Rate > 0 && rl.Rate > 0 {
			t.Value = rl.Rate / d.Rate
			t.Load = loads(rl.Load, d.Load)
		} else {
			t.Missing = true
		}
		out = append(out, t)
	}
	return out
}

// workerModes are the worker's runs the per-mode targets look at: every
// mode keeps exactly-once (carried within its stated limits).
var workerModes = []string{"worker", "worker/grouped", "worker/carried"}

// cheapest is the worker's mode whose run costs the least per message by
// cost in regime at conc ("worker" if none was measured): the bill target
// is judged on the cheapest mode that keeps the guarantees.
func (r *Result) cheapest(regime string, conc int, cost func(Drain) float64) string {
	best, bestCost := "worker", 0.0
	for _, w := range workerModes {
		d, ok := r.findIn(regime, w, conc)
		if !ok || cost(d) <= 0 {
			continue
		}
		if c := cost(d); bestCost == 0 || c < bestCost {
			best, bestCost = w, c
		}
	}
	return best
}

func regimeName(g string) string {
	if g == RegimeAWS {
		return "aws-like latency"
	}
	return "emulator speed"
}

func consumerName(c string) string {
	switch c {
	case "baseline":
		return "hand-written"
	case "worker":
		return "worker (optimistic)"
	case ConsumerLambda:
		return "LambdaHandler (optimistic)"
	case ConsumerLambdaHandwritten:
		return "hand-written handler"
	}
	if m, ok := strings.CutPrefix(c, "worker/"); ok {
		if m == "grouped" {
			return "worker (group commit " + GroupCommitWindow.String() + ")"
		}
		return "worker (" + m + ")"
	}
	return c
}

func (r *Result) targetsTable() *table {
	t := &table{head: []string{"target", "run", "measured", "bound", "verdict", "load (1 min) at start"}}
	for _, g := range r.Targets() {
		v := "-"
		if !g.Missing {
			v = fmt.Sprintf("%.2f", g.Value)
		}
		t.add(g.Name, g.Run, v, g.bound(), g.Verdict(), cmp.Or(g.Load, "-"))
	}
	return t
}
