package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Metric names of the claim-mode table.
const (
	MetricCalled       = "keys called at least once"
	MetricCallsFirst   = "calls (first per key)"
	MetricDoublesOK    = "repeat calls excused (a worker down/stalled or a write failed between effect and commit)"
	MetricDoublesBad   = "repeat calls not excused"
	MetricDoublesLate  = "repeat calls on a claim won with its lease over (product bug)"
	MetricCallOrder    = "groups whose first calls follow seq order"
	MetricUnknownCalls = "calls matching no message sent"
)

// Excuser says why a repeat call of a key may have happened: prev is a call
// the worker slot prev.Worker made, next the call after it. It returns ""
// when nothing excuses it.
type Excuser func(prev, next Call) string

// Excuses builds the claim-mode Excuser from the chaos actions and the
// dedup writes the trace saw. A repeat call is excused only by the window
// between an effect and its commit, as claim mode documents it:
//
//   - the worker of the earlier call did not complete the key before the
//     next call and, between the two calls, it was killed, frozen,
//     partitioned or stopped (an action overlapping the window), or one of
//     its writes of the key (heartbeat, commit) failed or was held. A
//     successful complete by that worker closes the window: a call after it
//     is never excused;
//   - or the later call came from a worker that was frozen or partitioned
//     while it held its claim, between the claim's answer and the call: a
//     worker stalled inside its effect, whose call went out after its lease
//     had passed to another worker ("stalled holding its claim").
//
// A call after a claim that won with its lease already over (a put delayed
// by retries or a partition, or its answer held past the lease) is excused
// by neither: the worker ran the effect on a claim it no longer held. Such a
// repeat call gets a reason that begins with LateClaim: VerifyClaim counts
// it on a row of its own (a product bug, see the report).
func Excuses(actions []Action, marks func(key string) []Mark) Excuser {
	overlaps := func(worker string, from, to time.Time) (Action, bool) {
		for _, a := range actions {
			if a.Worker == worker && !a.Start.After(to) && !a.End.Before(from) {
				return a, true
			}
		}
		return Action{}, false
	}
	return func(prev, next Call) string {
		ms := marks(prev.Key)
		closed := false
		for _, m := range ms {
			if m.Worker == prev.Worker && m.Event == "complete" && m.OK && m.At.After(prev.At) && m.At.Before(next.At) {
				closed = true
			}
		}
		if !closed {
			if a, ok := overlaps(prev.Worker, prev.At, next.At); ok {
				return fmt.Sprintf("%s %s at %s", a.Worker, a.Kind, a.Start.Format("15:04:05.000"))
			}
			for _, m := range ms {
				if m.Worker != prev.Worker || m.At.Before(prev.At) || m.At.After(next.At) {
					continue
				}
				if (m.Event == "extend" || m.Event == "complete") && (m.Fault != "pass" || !m.OK) {
					return fmt.Sprintf("%s %s %s at %s", m.Worker, m.Event, m.Fault, m.At.Format("15:04:05.000"))
				}
			}
		}
		// The later call: its worker's last claim of the key that took
		// effect before the call, and a stall between that claim's answer
		// and the call.
		var claimed time.Time
		for _, m := range ms {
			if m.Worker == next.Worker && m.Event == "claim" && m.OK && !m.At.After(next.At) {
				claimed = m.At
			}
		}
		if !claimed.IsZero() {
			for _, a := range actions {
				if a.Worker == next.Worker && (a.Kind == "SIGSTOP" || a.Kind == "partition") &&
					!a.Start.After(next.At) && a.End.After(claimed) {
					return fmt.Sprintf("%s %s holding its claim at %s", a.Worker, a.Kind, a.Start.Format("15:04:05.000"))
				}
			}
		}
		// Either call made on a claim that was over when it won.
		for _, c := range []Call{prev, next} {
			var last Mark
			for _, m := range ms {
				if m.Worker == c.Worker && m.Event == "claim" && m.OK && !m.At.After(c.At) {
					last = m
				}
			}
			if last.Late {
				return fmt.Sprintf("%s: %s won its claim with the lease already over (answered at %s), then called", LateClaim, c.Worker, last.At.Format("15:04:05.000"))
			}
		}
		return ""
	}
}

// LateClaim begins the reason Excuses gives a repeat call made on a claim
// that won with its lease already over.
const LateClaim = "late claim"

// VerifyClaim checks a claim-mode run (the http effect against the counting
// downstream): every deposit called at least once and its record COMPLETED;
// a repeat call of a key only where excuse explains it; each group's first
// calls in seq order; the queue empty and the DLQ exactly the poison
// messages; graceful stops in time. excused counts the repeat calls it
// excused, by reason kind.
//
// Repeat calls on a claim won with its lease already over (LateClaim) fail
// the run unless allowLate is set: then they are counted and shown, as a
// known product bug, without failing it.
func VerifyClaim(p Plan, o Observed, calls []Call, excuse Excuser, allowLate bool) (rep Report, excused map[string]int) {
	var (
		rows []Row
		pr   problems
	)
	excused = map[string]int{}
	row := func(metric string, want, got any, ok bool) {
		rows = append(rows, Row{Metric: metric, Expected: fmt.Sprint(want), Actual: fmt.Sprint(got), OK: ok})
	}
	byKey := map[string]int{}
	for i, d := range p.Deposits {
		byKey[d.Key] = i
	}
	poison := map[string]bool{}
	for _, s := range p.Poison {
		poison[s.Key] = true
	}
	perKey := map[string][]Call{}
	unknown := 0
	for _, c := range calls {
		if poison[c.Key] {
			continue
		}
		i, ok := byKey[c.Key]
		if !ok || p.Deposits[i].Group != c.Group || (!p.Deposits[i].NoSeq && p.Deposits[i].Seq != c.Seq) {
			unknown++
			pr.add("unknown call", "call %d from %s: key %q group %q seq %d matches no deposit", c.N, c.Worker, c.Key, c.Group, c.Seq)
			continue
		}
		perKey[c.Key] = append(perKey[c.Key], c)
	}
	called, good, bad, late := 0, 0, 0, 0
	for _, d := range p.Deposits {
		cs := perKey[d.Key]
		if len(cs) == 0 {
			where := "not in the DLQ either"
			for _, m := range o.DLQMessages {
				if m.Body == d.Body {
					where = "it is in the DLQ"
				}
			}
			pr.add("lost", "group %s seq %d (key %s) was never called; %s", d.Group, d.Seq, d.Key, where)
			pr.key(d.Key)
			continue
		}
		called++
		for i := 1; i < len(cs); i++ {
			why := excuse(cs[i-1], cs[i])
			if why == "" {
				bad++
				pr.add("repeat call not excused", "key %s: call %d by %s at %s, again by %s at %s (%s later), with no kill, stall, partition, stop or failed heartbeat/commit of %s in between and no stall of %s since its claim",
					d.Key, cs[i-1].N, cs[i-1].Worker, cs[i-1].At.Format("15:04:05.000"), cs[i].Worker, cs[i].At.Format("15:04:05.000"),
					cs[i].At.Sub(cs[i-1].At).Round(time.Millisecond), cs[i-1].Worker, cs[i].Worker)
				pr.key(d.Key)
				continue
			}
			if strings.HasPrefix(why, LateClaim) {
				late++
				kind := "repeat call on a late claim"
				if allowLate {
					kind += " (allowed by -allow-late-claims)"
				}
				pr.add(kind, "key %s: call %d by %s at %s, call %d by %s at %s: %s", d.Key, cs[i-1].N, cs[i-1].Worker,
					cs[i-1].At.Format("15:04:05.000"), cs[i].N, cs[i].Worker, cs[i].At.Format("15:04:05.000"), why)
				pr.key(d.Key)
				continue
			}
			good++
			_, kind, _ := strings.Cut(why, " ") // the worker slot goes
			kind, _, _ = strings.Cut(kind, " at ")
			excused[kind]++
		}
	}
	row(MetricCalled, len(p.Deposits), called, called == len(p.Deposits))
	row(MetricUnknownCalls, 0, unknown, unknown == 0)
	row(MetricDoublesOK, "-", good, true)
	row(MetricDoublesBad, 0, bad, bad == 0)
	row(MetricDoublesLate, 0, late, late == 0 || allowLate)

	// Order: each group's first calls, in arrival order, have increasing seqs.
	firsts := map[string][]Call{}
	for _, cs := range perKey {
		firsts[cs[0].Group] = append(firsts[cs[0].Group], cs[0])
	}
	inOrder := 0
	for _, g := range p.Groups {
		fs := firsts[g]
		sort.Slice(fs, func(i, j int) bool { return fs[i].N < fs[j].N })
		ok := true
		for i := 1; i < len(fs); i++ {
			if fs[i].Seq <= fs[i-1].Seq {
				ok = false
				pr.add("order", "group %s: seq %d first called (call %d) after seq %d (call %d)", g, fs[i].Seq, fs[i].N, fs[i-1].Seq, fs[i-1].N)
				pr.key(fs[i-1].Key)
				pr.key(fs[i].Key)
				break
			}
		}
		if ok {
			inOrder++
		}
	}
	row(MetricCallOrder, len(p.Groups), inOrder, inOrder == len(p.Groups))

	// Records, queue, DLQ and stops as in transactional mode.
	base := Verify(p, o)
	for _, m := range []string{MetricRecords, MetricQueue, MetricDLQ, MetricGraceful} {
		if r, ok := base.Row(m); ok {
			rows = append(rows, r)
		}
	}
	for _, prob := range base.Problems {
		for _, kind := range []string{"dedup record", "queue not empty", "unexpected in DLQ", "poison not in DLQ", "graceful stop"} {
			if strings.HasPrefix(prob, kind+":") {
				pr.out = append(pr.out, prob)
			}
		}
	}
	for _, k := range base.Keys {
		if _, isDeposit := byKey[k]; isDeposit && o.Records[k].Status != "COMPLETED" {
			pr.key(k)
		}
	}
	return Report{Rows: rows, Problems: pr.list(), Keys: pr.keys}, excused
}
