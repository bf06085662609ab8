package bench

import (
	"fmt"
	"slices"
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
	t := &table{head: []string{"consumer", "conc/proc", "msg/s", "× hand-written", "group's wait for its next message", "wait − hand-written's", "ack delay", "SQS req/msg", "msgs/delete batch"}}
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
			fmt.Sprintf("%.3f", d.PerMessage("SQS")), perBatch(d.Op("SQS.DeleteMessageBatch")))
	}
	return t
}

// msf formats a duration in ms with one decimal.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func (r *Result) relayTable() *table {
	t := &table{head: []string{"producer", "groups", "writers", "msg/s reaching SQS", "× direct", "msg/s written", "DynamoDB req/msg", "SQS req/msg", "WRU/msg", "producer errors"}}
	for _, x := range r.Relay {
		vs := "-"
		if x.Mode != RelayDirect {
			if d, ok := r.relayRun(RelayDirect, x.Groups); ok {
				vs = ratio(x.Rate, d.Rate)
			}
		}
		t.add(relayName(x.Mode), fmt.Sprint(x.Groups), fmt.Sprint(x.Writers), fmt.Sprintf("%.0f", x.Rate), vs, fmt.Sprintf("%.0f", x.Written/max(x.Seconds, 1e-9)),
			fmt.Sprintf("%.2f", perMessage(x.Window, "DynamoDB")), fmt.Sprintf("%.2f", perMessage(x.Window, "SQS")), fmt.Sprintf("%.1f", x.WriteUnits()), fmt.Sprintf("%.0f", x.ProducerErrors))
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
	fmt.Fprintf(b, "Saturated runs: each consumer's own process makes its fakes, pre-fills a FIFO queue with ledger deposits over %d message groups, and serves `/metrics` under the worker's names; the window opens %s after the first effect and closes after %s (or before the backlog runs low). ",
		r.Config.FakeGroups, r.Config.Warmup, r.Config.Window)
	fmt.Fprintf(b, "The worker is the library's `exactly.New` with the ledger effect and everything at its default (optimistic commit, one receiver per %d of the concurrency and at least %d, ack delay %s); group commit (grouped) adds `GroupCommit: %s`; carried sets `Commit: CommitCarried`, where the ledger's entry item carries the dedup record: 4 write units a message, as the hand-written consumer's, instead of 6. ",
		pool.HandlersPerReceiver, pool.DefaultReceivers, pool.DefaultAckDelay, GroupCommitWindow)
	b.WriteString("The hand-written consumer is the same code as in the emulator regime, on the fakes.\n\n")
	b.WriteString("Is the comparison fair? Both consumers drain the same FIFO queue, pre-filled the same way, through the same latency layer, at the same concurrency: N handlers for the worker, N receive loops for the hand-written consumer, so at most N transactions under way for either. ")
	b.WriteString("A FIFO receive brings up to 10 messages of one group (SQS does, and so do the fakes), and a group's messages run one after another, so a consumer keeps N transactions under way only if it holds about N groups' batches. ")
	b.WriteString("The hand-written consumer does: each loop holds its receive's 10. ")
	b.WriteString("The worker held at most `MaxInFlight` messages, which defaulted to 2×concurrency + 10 per receiver (52 at concurrency 16, 208 at 64), about 5 and 20 groups at a time. ")
	b.WriteString("Measured before the fix (this harness, this machine, 2026-11-27, load average 15 to 19; the table below shows the same columns after it): the worker kept 7.0 of its 16 transactions under way on average (0.43 of its concurrency) where the hand-written consumer kept 13.0 (0.81), and 27.7 of 64 against 50.6; its receivers polled 40 % of the time (0.8 of 2 receives under way, 3.5 of 8), waiting for in-flight slots; rates 0.50× and 0.48× the hand-written consumer's. ")
	b.WriteString("Nothing else stood out: neither process was CPU-bound (0.11 to 0.33 cores of 2), the worker made no visibility calls, its deletes went out 9.8 to 10 a batch, and the ack delay held no handler (a slot is released when its message settles, before the delete is batched). ")
	fmt.Fprintf(b, "The harness was fair and the cause the product's: `MaxInFlight` now defaults to 10 × (concurrency + receivers), and a receiver polls only while the lanes with work (groups, or a standard queue's messages) and 10 per open receive stay within 2×concurrency + 10 per receiver, so a standard queue's worker holds no more than before (`TestRateAtAWSLatencyWithGroupsOfSeveralMessages` and `TestWhatAPoolHoldsWhileItsHandlersAreBusy` in `internal/pool`). Receivers: one per %d handlers, at least %d.\n\n", pool.HandlersPerReceiver, pool.DefaultReceivers)
	r.throughputTable(RegimeAWS).markdown(b)
	b.WriteString("\n")
	if st := r.statesTable(); len(st.rows) > 0 {
		b.WriteString("Where a message's time goes, measured in each consumer's process: receives and transactions under way are the time the latency layer held those calls over the window's length (how many were under way on average); × conc is transactions under way over the concurrency, the share of the consumer's concurrency it used; a transaction took is the mean time one was held, modelled at ")
		fmt.Fprintf(b, "%s ± %.0f %%: more is the layer's timers firing late on this loaded machine, and waits on the fakes' locks (each fake serves its process behind one mutex, which the fake DynamoDB holds only to evaluate and apply a write: below). ", Base("DynamoDB", "TransactWriteItems"), 100*r.Config.Jitter)
		b.WriteString("Receive → effect start is from the answer of the message's receive to the start of its effect: the hand-written consumer's message waits for its batch's predecessors, the worker's for its group's. Effect end → delete sent holds the commit (one transaction) and, for the worker, its ack delay, for the hand-written consumer the rest of its batch.\n\n")
		st.markdown(b)
		b.WriteString("\n")
		b.WriteString("What is left: with its concurrency used in full, the worker's rate is its concurrency over its transaction's time, where the hand-written consumer's loops spend about a fifth of theirs in receives and deletes, so the worker should reach about 1.25× it when their transactions take as long; where a ratio falls short, compare the transactions' times in the table. ")
		b.WriteString("At concurrency 64 on this machine they often do not: the worker's are held longer than the hand-written consumer's. A CPU and mutex profile of the worker at concurrency 64 (`bench consume -regime aws -consumer worker -concurrency 64 -cpuprofile -mutexprofile`, load average 22) put 63 % of its lock contention in the fake DynamoDB's `TransactWriteItems`, which then parsed every item's expressions under its one lock (about 50 µs of CPU a transaction; the worker's have three items and a condition, the hand-written consumer's two and none). ")
		b.WriteString("The lock was measured and is not what holds the worker back. At the bench's pace (64 goroutines committing the worker's transaction every 12 ms, about 4,200 a second, load average 10 to 11: `BenchmarkCommitTimeAtBenchRate` in `internal/memdynamo`) the one lock made a commit take 0.32 to 0.51 ms on average (p90 0.56 to 0.79 ms, p99 5 to 6 ms), against a gap of 5 to 10 ms between the worker's transactions and the hand-written consumer's in the table; memdynamo now parses a write outside its lock and evaluates and applies it under the lock (0.13 to 0.15 ms, p90 0.08 ms, p99 1.9 to 2.4 ms), and the gap stayed. ")
		b.WriteString("Same-run ratios at concurrency 64, 2026-11-27, optimistic and carried (load average at the start of the run): with the one lock 1.16, 1.17 (1.3); 1.02, 1.19 (2.5); 1.03, 1.09 (13.2, falling to 4.5); 0.70, 0.91 (5.9); 0.86, 0.89 (6.1); pinned to one core 1.45, 1.36 (9.3). With the finer lock 1.17, 1.22 (4.6); 0.99, 1.14 (2.0); 1.06, 1.01 (5.4); 0.81, 1.01 (10.1); pinned to one core 0.88, 1.11 (10.2). With a load average up to 5.4 at the start, the worker reaches the target, or within 0.01 of it, with either lock (optimistic 0.99 to 1.17, carried 1.01 to 1.22); from 5.9 to 10.1 it misses with either (optimistic 0.70 to 0.86, carried 0.89 to 1.01); the worker's transactions took 2.8 to 3.1 ms longer than the hand-written consumer's at low load with either lock. The machine's load moves the ratio, not the fake's lock: the miss is the harness's (a loaded 2-core machine), and the product at concurrency 64 reaches the hand-written consumer's rate where the harness has the CPU. What remains of the gap under load is not explained: the worker's process spends 1.3 to 1.8 times the hand-written consumer's CPU per message, and on 2 cores shared with a load of 6 to 11 the latency layer's timers in the busier process likely fire later (a transaction took is the time the layer held it); fakes in another process would tell. ")
		fmt.Fprintf(b, "Group commit (grouped) made each commit wait out its %s window for company before the shared transaction went, so a group's next message waited the window plus the transaction: 0.86×, 0.84× and 0.69× the hand-written consumer at concurrency 2, 16 and 64 in the report before this one. The window is now the upper bound only: the processor counts its messages under way (from the effect's start to the message's end) and the shared transaction goes as soon as none of them is left outside a commit (`TestGroupCommitClosesWhenAllHaveJoined` in `internal/process`). A group never waits for a transaction under way, so at concurrency 2 the two handlers drift apart and commit mostly alone (about one DynamoDB request a message); at 16 and 64 groups form (DynamoDB requests per message in the table above). Counted in the worker at concurrency 64 (`bench consume -regime aws -consumer grouped`, a build instrumented for it, load average 2 to 3): 99.5 %% of groups went before the window, with 2.5 to 4.7 commits each, and a group's first commit waited 0.1 to 0.3 ms on average. So the wait then cost about nothing, and there was nothing to gain either: a message still waited one transaction's round trip holding its handler, as an optimistic commit does, so group commit's rate followed the optimistic commit's (1.30×, 1.17×, 1.10× in the report before this one). Now a message whose commit waits in the shared transaction gives its handler's slot back, so another group's effect runs meanwhile (`TestGroupCommitGivesTheSlotBack` in `internal/pool`; its group's next message still starts only after the answer: `TestGroupCommitKeepsTheGroupsOrder`), and a shared transaction waits only for the effects that began before its first commit joined (`TestGroupCommitPipelined` in `internal/process`). `Concurrency` then bounds the effects running at once, not the commits under way, which the groups the worker runs at once bound (2×concurrency + 10 per receiver). A handler that gives its slot back finishes more messages than one receiver per %d handlers brings, so with group commit the receivers default to one per %d (`pool.ReceiversFor`): with one per %d, both worker modes were bound by their receives at 16 and 64 (2.0 of 2 and 8.0 of 8 under way all the time) and grouped reached 1.21–1.23× and 1.21–1.24× there, no more than optimistic. At concurrency 2 the grouped worker keeps about 7.5 transactions under way with its 2 handlers (the hand-written consumer 1.6): its rate is then bound by the groups it holds, not by its concurrency, so that ratio compares two bounds, not two consumers at equal concurrency. The cost is DynamoDB requests: commits no longer return together to handlers that start their next effects together, so few overlap, and a shared transaction gathers about 1.0 to 1.25 commits (DynamoDB requests per message in the table above; 0.17 to 0.27 when a waiting commit held its handler). Two other rules were measured: counting a lane whose commit has its answer as under way until its next message begins gathered more at 64 (0.50 requests per message) at 1.13×; that and also waiting for effects begun after the group opened, 0.41 at 1.14×. DynamoDB bills write units, the same either way, so the rule that keeps the rate was kept.\n\n", GroupCommitWindow, pool.HandlersPerReceiver, pool.HandlersPerReceiverGroupCommit, pool.HandlersPerReceiver)
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
