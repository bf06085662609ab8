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

// msf formats a duration in ms with one decimal.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func (r *Result) relayTable() *table {
	t := &table{head: []string{"producer", "groups", "writers", "msg/s reaching SQS", "× direct", "msg/s written", "DynamoDB req/msg", "SQS req/msg", "WRU/msg", "producer errors", "load (1 min) at start"}}
	for _, x := range r.Relay {
		vs := "-"
		if x.Mode != RelayDirect {
			if d, ok := r.relayRun(RelayDirect, x.Groups); ok {
				vs = ratio(x.Rate, d.Rate)
			}
		}
		t.add(relayName(x.Mode), fmt.Sprint(x.Groups), fmt.Sprint(x.Writers), fmt.Sprintf("%.0f", x.Rate), vs, fmt.Sprintf("%.0f", x.Written/max(x.Seconds, 1e-9)),
			fmt.Sprintf("%.2f", perMessage(x.Window, "DynamoDB")), fmt.Sprintf("%.2f", perMessage(x.Window, "SQS")), fmt.Sprintf("%.1f", x.WriteUnits()), fmt.Sprintf("%.0f", x.ProducerErrors), load1(x.Load))
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
	b.WriteString("Every figure below says which regime it was measured in:\n\n")
	b.WriteString("- **emulator speed**: the built `worker run` and the hand-written consumer, each its own process, through aws-sdk-go-v2 against fauxqs and DynamoDB Local on this machine. ")
	b.WriteString("Rates here are bound by the emulators' CPU (DynamoDB Local spends milliseconds of CPU per transaction item, more than a round trip on AWS), so their ratios say where the CPU goes, not what AWS gives. ")
	b.WriteString("The consumers' CPU per message is measured here: it includes the SDK (signing, serialisation, HTTP), as on AWS, and nothing of the emulators.\n")
	b.WriteString("- **aws-like latency**: each consumer in its own `bench consume` process on the in-memory fakes (`internal/memsqs`, `internal/memdynamo`: the fakes `exactlytest` exposes) behind a layer that holds every call for the in-region latency below, half before the fake answers and half after, with uniform seeded jitter. ")
	b.WriteString("The fakes answer in microseconds, so throughput is bound by the modelled latency and the consumer's own concurrency, as on AWS. ")
	b.WriteString("No SDK and no network: the SDK's marshalling and signing are measured in the emulator regime; the CPU figures of this regime include the fakes' and are not the target's.\n\n")
	b.WriteString("The latency model (commonly measured in-region round trips from a client in the same region, warm connection, not AWS guarantees: SQS answers in 10-20 ms; DynamoDB reads a single item in a few ms, writes in 5-10 ms; a transaction coordinates its items and takes longer):\n\n")
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
	fmt.Fprintf(b, "The SQS-requests misses above are runs slower than the %.0f msg/s a queue needs to fill a delete batch of 10 within the ack delay (%s): %s. A FIFO group's deletes wait for its last message in flight (SQS hands out none of the group before they are all deleted), so a group's run of 10 goes in one request at any rate; below that rate, the last deletes of runs shorter than 10 go out with fewer, so that a FIFO group waits at most the ack delay for its next message (the emulators' rates move with the machine's load).\n\n",
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
	b.WriteString("Each target is a ratio of two runs of this report (same regime, same concurrency), checked against its bound. ")
	b.WriteString("A target that does not hold is printed as such: these are today's product's figures.\n\n")
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
	fmt.Fprintf(b, "\n%d of %d hold.", held, judged)
	if n := len(ts) - judged; n > 0 {
		fmt.Fprintf(b, " %d row(s) marked reference are shown beside a target, not judged.", n)
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
	b.WriteString("\n")
	fmt.Fprintf(b, "Saturated runs: each consumer's own process makes its fakes, pre-fills a FIFO queue with ledger deposits over %d message groups, and serves `/metrics` under the worker's names; the window opens %s after the first effect and closes after %s (or before the backlog runs low). ",
		r.Config.FakeGroups, r.Config.Warmup, r.Config.Window)
	fmt.Fprintf(b, "The worker is the library's `exactly.New` with the ledger effect and everything at its default (optimistic commit, one receiver per %d of the concurrency and at least %d, ack delay %s); group commit (grouped) adds `GroupCommit: %s`; carried sets `Commit: CommitCarried`, where the ledger's entry item carries the dedup record: 4 write units a message, as the hand-written consumer's, instead of 6. ",
		pool.HandlersPerReceiver, pool.DefaultReceivers, pool.DefaultAckDelay, GroupCommitWindow)
	b.WriteString("The hand-written consumer is the same code as in the emulator regime, on the fakes: N receive loops against the worker's N handlers, so at most N transactions under way for either. ")
	b.WriteString("With its concurrency in full use the worker's rate is its concurrency over its transaction's time, where the hand-written consumer's loops spend about a fifth of theirs in receives and deletes: about 1.25× is what the model gives; a shortfall shows in the next table as the worker's transactions held longer (the latency layer's timers firing late in the busier process of a loaded machine). ")
	b.WriteString("Why the comparison is fair, what it found (the worker's in-flight bound), the profiles and same-run ratios under load, and how group commit came to its rule: [TESTING.md](TESTING.md#the-saturated-runs-at-aws-like-latency-what-they-found).\n\n")
	if st := r.statesTable(); len(st.rows) > 0 {
		b.WriteString("Where a message's time goes, measured in each consumer's process: receives and transactions under way are the time the latency layer held those calls over the window's length (how many were under way on average); × conc is transactions under way over the concurrency, the share of the consumer's concurrency it used; a transaction took is the mean time one was held, modelled at ")
		fmt.Fprintf(b, "%s ± %.0f %% (more is the layer's timers firing late, and waits on the fakes' locks). ", Base("DynamoDB", "TransactWriteItems"), 100*r.Config.Jitter)
		b.WriteString("Receive → effect start is from the answer of the message's receive to the start of its effect: the hand-written consumer's message waits for its batch's predecessors, the worker's for its group's. Effect end → delete sent holds the commit (one transaction) and, for the worker, its ack delay, for the hand-written consumer the rest of its batch.\n\n")
		st.markdown(b)
		b.WriteString("\n")
	}
	for _, d := range r.Drains() {
		del := d.Op("SQS.DeleteMessageBatch")
		if d.regime() != RegimeAWS || d.Consumer == "baseline" || del <= 0 || 1/del <= 10.5 {
			continue
		}
		ceiling := 10 / Base("SQS", "DeleteMessageBatch").Seconds()
		fmt.Fprintf(b, "- %s at concurrency %d applied %.0f msg/s but sent %.3f `DeleteMessageBatch` per message applied (%.1f messages a batch, where a batch holds at most 10): its deletes fell behind its effects. "+
			"At a %s round trip one delete batch at a time tops out near %.0f msg/s (`internal/pool` now sends up to 16 at once); what waits longer than the visibility timeout comes back (a duplicate to the ledger, and requests). "+
			"Its SQS requests per message in the window are not comparable with the floor (the targets table says so).\n",
			label(d.Consumer, d.Procs), d.Conc, d.Rate, del, 1/del, Base("SQS", "DeleteMessageBatch"), ceiling)
	}
	b.WriteString("\n")
	if len(r.HotGroup) > 0 {
		b.WriteString("### One hot FIFO group\n\n")
		b.WriteString("The same consumers on a queue whose messages are all in one group (at the highest concurrency): SQS hands out a group's next messages only once its in-flight ones are deleted, so a group's pace is one receive, its messages' effects one after the other, and the delete. ")
		b.WriteString("The group's wait for its next message is measured in the consumer's process, from the end of one message's effect (its writes built, before the commit) to the start of the next one's: it holds the commit, the delete (with the worker's ack delay) and the next receive. ")
		b.WriteString("The target: the worker adds at most its ack delay to what the hand-written consumer waits.\n\n")
		r.hotGroupTable().markdown(b)
		b.WriteString("\n")
	}
	if len(r.Relay) > 0 {
		b.WriteString("### The relay against a direct producer\n\n")
		fmt.Fprintf(b, "In the harness's process, on fresh fakes behind the same latency layer, %d producer goroutines for a %s window after %s: ", r.Config.RelayWriters, r.Config.Window, r.Config.Warmup)
		b.WriteString("the direct producer writes a business item (`PutItem`) and then sends its message straight to SQS (`SendMessage`): the dual write the outbox replaces, which loses the message if the process dies in between. ")
		b.WriteString("The outbox producer commits the same item and the message in one `outbox.Write` (`TransactWriteItems`), and an `outbox.Relay` with its defaults publishes the messages. ")
		b.WriteString("The rate is messages that reached SQS per second; requests and write units are all of the run's (producers and relay) per message that reached SQS.\n\n")
		r.relayTable().markdown(b)
		b.WriteString("\n")
		fmt.Fprintf(b, "`GroupBatch %d, PerGroup %d` rows run the relay set for a hot group: `Relay.GroupBatch` (`worker relay --group-batch`, opt-in: its order guarantee is in OUTBOX.md) puts up to %d of a group's messages in one `SendMessageBatch`, in order, and `Relay.PerGroup` (`--per-group`) takes up to %d of a group a round; by default a request holds one message of a group, so a hot group moves one message per SQS round trip, and a round takes 10. ", RelayGroupBatchSize, RelayGroupBatchPerGroup, RelayGroupBatchSize, RelayGroupBatchPerGroup)
		b.WriteString("Every `outbox.Write` of a group advances the group's head on a condition. By default concurrent Writes of one group in one process are combined: while a transaction of the group is under way the others wait and then go together in one transaction. The row without combining (`outbox.WithoutCombining`) shows what that replaces: each Write reads the head and sends its own transaction, so concurrent writers of one group retry and a group's Writes go one at a time; compare msg/s written with msg/s reaching SQS. ")
		b.WriteString("The backlog rows measure the relay alone: the table is filled before the relay starts and no producer runs. ")
		b.WriteString("Spread over many groups (200 above), the relay batches across groups.\n\n")
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
	return fmt.Sprintf("At concurrency %s, against the hand-written at-least-once consumer in the same run: %s (load average %s at the run's start, %s at its end).",
		strings.Join(cs, ", "), strings.Join(parts, "; "), r.LoadBefore, r.LoadAfter)
}
