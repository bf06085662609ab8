package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/pool"
)

// regimes returns the regimes the runs were measured in, emulator first.
func (r *Result) regimes() []string {
	var out []string
	for _, g := range []string{RegimeEmulator, RegimeAWS} {
		for _, d := range r.Runs {
			if d.regime() == g {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func (r *Result) hotGroupTable() *table {
	t := &table{head: []string{"consumer", "conc/proc", "msg/s", "× hand-written", "group's wait for its next message", "wait − hand-written's", "ack delay", "SQS req/msg", "msgs/delete batch", "load (1 min) at start"}}
	var base Drain
	for _, d := range r.HotGroup {
		if d.Consumer == "baseline" {
			base = d
		}
	}
	for _, d := range r.HotGroup {
		vs, extra := "-", "-"
		if d.Consumer != "baseline" {
			vs = ratio(d.Rate, base.Rate)
			if base.GroupWait() > 0 {
				extra = msf(d.GroupWait() - base.GroupWait())
			}
		}
		t.add(label(d.Consumer, d.Procs), fmt.Sprint(d.Conc), fmt.Sprintf("%.0f", d.Rate), vs, msf(d.GroupWait()), extra, msf(pool.DefaultAckDelay),
			fmt.Sprintf("%.3f", d.PerMessage("SQS")), perBatch(d.Op("SQS.DeleteMessageBatch")), load1(d.Load))
	}
	return t
}

// msOr is msf(d), or "-" for zero (not measured).
func msOr(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return msf(d)
}

// msf formats a duration in ms with one decimal.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func (r *Result) relayTable() *table {
	t := &table{head: []string{"producer", "groups", "writers", "msg/s reaching SQS", "× direct", "msg/s written", "DynamoDB req/msg", "SQS req/msg", "WRU/msg", "write → SQS p50", "p99", "producer errors", "load (1 min) at start"}}
	for _, x := range r.Relay {
		vs := "-"
		if x.Mode != RelayDirect {
			if d, ok := r.relayRun(RelayDirect, x.Groups); ok {
				vs = ratio(x.Rate, d.Rate)
			}
		}
		t.add(relayName(x.Mode), fmt.Sprint(x.Groups), fmt.Sprint(x.Writers), fmt.Sprintf("%.0f", x.Rate), vs, fmt.Sprintf("%.0f", x.Written/max(x.Seconds, 1e-9)),
			fmt.Sprintf("%.2f", perMessage(x.Window, "DynamoDB")), fmt.Sprintf("%.2f", perMessage(x.Window, "SQS")), fmt.Sprintf("%.1f", x.WriteUnits()), msOr(x.P50), msOr(x.P99), fmt.Sprintf("%.0f", x.ProducerErrors), load1(x.Load))
	}
	return t
}

func relayName(mode string) string {
	switch mode {
	case RelayDirect:
		return "direct (PutItem, then SendMessage)"
	case RelayGroupBatch:
		return fmt.Sprintf("outbox.Write + Relay, GroupBatch %d, PerGroup %d", RelayGroupBatchSize, RelayGroupBatchPerGroup)
	case RelayGroupBatchAlone:
		return fmt.Sprintf("outbox.Write without combining + Relay, GroupBatch %d, PerGroup %d", RelayGroupBatchSize, RelayGroupBatchPerGroup)
	case RelayBacklog:
		return "Relay alone, on a backlog"
	case RelayBacklogGroupBatch:
		return fmt.Sprintf("Relay alone, on a backlog, GroupBatch %d, PerGroup %d", RelayGroupBatchSize, RelayGroupBatchPerGroup)
	}
	return "outbox.Write + Relay"
}

// latencyModelTable lists the aws regime's latencies.
func latencyModelTable(scale, jitter float64) *table {
	t := &table{head: []string{"operation", "held for (mean)", "range"}}
	keys := make([]string, 0, len(Latencies))
	for k := range Latencies {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d := time.Duration(float64(Latencies[k]) * scale)
		name := k
		if k == "SQS.*" {
			name = "SQS, every operation"
		} else if k == "DynamoDB.*" {
			name = "DynamoDB, any other operation"
		}
		lo := time.Duration(float64(d) * (1 - jitter))
		hi := time.Duration(float64(d) * (1 + jitter))
		t.add(name, msf(d), msf(lo)+" to "+msf(hi))
	}
	return t
}

// regimesMarkdown says which regime each figure is in and what the
// aws-like one models.
func regimesMarkdown(b *strings.Builder, r *Result) {
	b.WriteString("## Two regimes\n\n")
	b.WriteString("- **emulator speed**: `worker run` and the hand-written consumer through aws-sdk-go-v2 against fauxqs and DynamoDB Local, whose CPU binds the rates: it measures CPU per message with the SDK.\n")
	b.WriteString("- **aws-like latency**: each consumer on the in-memory fakes, every call held for the latency below, so the model and the concurrency bind the rates, as on AWS.\n\n")
	b.WriteString("The latency model (typical in-region round trips, not AWS guarantees):\n\n")
	scale, jitter := r.Config.LatencyScale, r.Config.Jitter
	if scale <= 0 {
		scale = 1
	}
	if jitter <= 0 {
		jitter = DefaultJitter
	}
	latencyModelTable(scale, jitter).markdown(b)
	b.WriteString("\n")
}

// failuresMarkdown lists the runs that failed.
// fillNote explains the SQS-requests misses of runs too slow to fill a
// delete batch within the ack delay: 10 messages per ack delay (200
// msg/s at 50 ms) is what a full batch needs; below it a batch goes out
// with fewer, by design, so that a FIFO group does not wait longer.
func fillNote(b *strings.Builder, r *Result) {
	need := 10 / pool.DefaultAckDelay.Seconds()
	var slow []string
	for _, d := range r.Drains() {
		if d.Consumer == "baseline" || d.Rate >= need || d.PerMessage("SQS") <= 1.1*SQSFloor {
			continue
		}
		slow = append(slow, fmt.Sprintf("%s at concurrency %d, %s (%.0f msg/s, %.1f a delete batch)", label(d.Consumer, d.Procs), d.Conc, regimeName(d.regime()), d.Rate, 1/max(d.Op("SQS.DeleteMessageBatch"), 1e-9)))
	}
	if len(slow) == 0 {
		return
	}
	fmt.Fprintf(b, "The SQS-requests misses are runs below the %.0f msg/s that fill a delete batch of 10 within the ack delay (%s), by design: a FIFO group waits at most the ack delay for its next message (%s).\n\n",
		need, pool.DefaultAckDelay, strings.Join(slow, "; "))
}

func failuresMarkdown(b *strings.Builder, r *Result) {
	if len(r.Failures) == 0 {
		return
	}
	b.WriteString("**Runs that failed and are left out of this report** (the harness went on):\n\n")
	for _, f := range r.Failures {
		b.WriteString("- " + f + "\n")
	}
	b.WriteString("\n")
}

// targetsMarkdown lists the targets and whether each holds.
func targetsMarkdown(b *strings.Builder, r *Result) {
	ts := r.Targets()
	if len(ts) == 0 {
		return
	}
	b.WriteString("## Targets of issue 22\n\n")
	r.targetsTable().markdown(b)
	held, judged := 0, 0
	for _, t := range ts {
		if t.Reference != "" {
			continue
		}
		judged++
		if t.Holds() {
			held++
		}
	}
	fmt.Fprintf(b, "\n%d of %d hold, each a ratio of two runs of this report at the same regime and concurrency.", held, judged)
	if n := len(ts) - judged; n > 0 {
		fmt.Fprintf(b, " %d reference row(s) are not judged.", n)
	}
	b.WriteString("\n\n")
	fillNote(b, r)
	failuresMarkdown(b, r)
}

// awsMarkdown is the aws-like regime's tables: saturated runs, the hot
// group and the relay.
func awsMarkdown(b *strings.Builder, r *Result) {
	if !slices.Contains(r.regimes(), RegimeAWS) {
		return
	}
	b.WriteString("## At AWS-like latency\n\n")
	b.WriteString(r.awsLead() + "\n\n")
	r.throughputTable(RegimeAWS).markdown(b)
	b.WriteString("\nThe model gives the worker about 1.25×: its rate is its concurrency over a transaction's time, where the hand-written consumer's loops spend a fifth of theirs in receives and deletes. ")
	b.WriteString("Why the comparison is fair and what it found: [TESTING.md](TESTING.md#the-saturated-runs-at-aws-like-latency-what-they-found).\n\n")
	if st := r.statesTable(); len(st.rows) > 0 {
		st.markdown(b)
		b.WriteString("\nWhere a message's time goes, in each consumer's process: a transaction held longer than the model's ")
		fmt.Fprintf(b, "%s is the latency layer's timers firing late on a loaded machine.\n\n", Base("DynamoDB", "TransactWriteItems"))
	}
	for _, d := range r.Drains() {
		del := d.Op("SQS.DeleteMessageBatch")
		if d.regime() != RegimeAWS || d.Consumer == "baseline" || del <= 0 || 1/del <= 10.5 {
			continue
		}
		ceiling := 10 / Base("SQS", "DeleteMessageBatch").Seconds()
		fmt.Fprintf(b, "- %s at concurrency %d: its deletes fell behind its effects (%.1f messages a delete batch, at most 10; one batch at a time at %s tops out near %.0f msg/s).\n",
			label(d.Consumer, d.Procs), d.Conc, 1/del, Base("SQS", "DeleteMessageBatch"), ceiling)
	}
	b.WriteString("\n")
	if len(r.HotGroup) > 0 {
		b.WriteString("### One hot FIFO group\n\n")
		r.hotGroupTable().markdown(b)
		b.WriteString("\nOne group moves a receive, its effects in turn and a delete at a time; the worker may add at most its ack delay to the hand-written consumer's wait.\n\n")
	}
	if len(r.Relay) > 0 {
		b.WriteString("### The relay against a direct producer\n\n")
		r.relayTable().markdown(b)
		fmt.Fprintf(b, "\nThe outbox and its relay against the dual write it replaces (`PutItem`, then `SendMessage`), %d producers each; `GroupBatch` is the hot-group setting ([OUTBOX.md](OUTBOX.md#a-hot-group---group-batch)).\n\n", r.Config.RelayWriters)
	}
}

// awsLead is the saturated runs' finding in one sentence: each worker
// mode's rate over the hand-written consumer's, by concurrency.
func (r *Result) awsLead() string {
	var concs []int
	by := map[string][]string{}
	var modes []string
	for _, d := range r.Drains() {
		if d.regime() != RegimeAWS {
			continue
		}
		if d.Consumer == "baseline" {
			concs = append(concs, d.Conc)
			continue
		}
		base := r.baselineRate(RegimeAWS, d.Conc)
		if base <= 0 {
			continue
		}
		l := label(d.Consumer, d.Procs)
		if _, ok := by[l]; !ok {
			modes = append(modes, l)
		}
		by[l] = append(by[l], fmt.Sprintf("%.2f", d.Rate/base))
	}
	if len(modes) == 0 {
		return "No saturated run of this regime."
	}
	parts := make([]string, 0, len(modes))
	for _, m := range modes {
		parts = append(parts, fmt.Sprintf("%s %s×", m, strings.Join(by[m], ", ")))
	}
	cs := make([]string, 0, len(concs))
	for _, c := range concs {
		cs = append(cs, strconv.Itoa(c))
	}
	return fmt.Sprintf("At concurrency %s, against the hand-written at-least-once consumer in the same run: %s.",
		strings.Join(cs, ", "), strings.Join(parts, "; "))
}
