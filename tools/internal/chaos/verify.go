package chaos

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Account is one acct# item of the ledger table.
type Account struct {
	Name    string
	Balance int64
	Applied int64
	LastSeq int64
}

// Entry is one entry# item of the ledger table: one applied effect.
type Entry struct {
	PK        string
	Key       string // the raw dedup key: the part of PK after the last '#'
	Account   string
	Group     string
	Seq       int64
	Amount    int64
	AppliedAt int64 // epoch ms
	MessageID string
}

// DLQMessage is one message read from the dead-letter queue.
type DLQMessage struct {
	MessageID string
	Group     string
	DedupID   string
	Body      string
}

// QueueCounts are a queue's approximate counts.
type QueueCounts struct {
	Visible  int64
	InFlight int64
	Delayed  int64
}

// Total is every message still in the queue.
func (q QueueCounts) Total() int64 { return q.Visible + q.InFlight + q.Delayed }

// Record is what the run needs of a dedup record.
type Record struct {
	Status   string // IN_PROGRESS or COMPLETED
	Attempts int    // the message's receive count at the last claim
}

// Stop is one graceful stop (SIGTERM) of a worker.
type Stop struct {
	Worker   string
	ExitCode int // -1: killed by a signal, or did not exit
	Took     time.Duration
	Limit    time.Duration // the shutdown timeout plus a margin
}

// Observed is what the run left behind, read after every worker stopped.
type Observed struct {
	Accounts    []Account
	Entries     []Entry
	Records     map[string]Record // by raw dedup key
	Queue       QueueCounts
	DLQ         QueueCounts // before the messages were read
	DLQMessages []DLQMessage
	Stops       []Stop
}

// Row is one line of the result table.
type Row struct {
	Metric   string
	Expected string
	Actual   string
	OK       bool
}

// Report is the verdict of Verify: the table, and every violation spelled out.
type Report struct {
	Rows     []Row
	Problems []string
	Keys     []string // dedup keys of the deposits involved in violations, first seen first
}

// OK reports whether every row holds.
func (r Report) OK() bool {
	for _, row := range r.Rows {
		if !row.OK {
			return false
		}
	}
	return true
}

// Row returns the row named metric, for tests.
func (r Report) Row(metric string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Metric == metric {
			return row, true
		}
	}
	return Row{}, false
}

// Metric names of the result table.
const (
	MetricAccounts  = "accounts (one per group)"
	MetricBalances  = "balance = sum sent once"
	MetricApplied   = "account applied count = deposits"
	MetricLastSeq   = "account last_seq = last seq sent"
	MetricOnce      = "keys applied exactly once"
	MetricDoubled   = "doubled applications"
	MetricLost      = "lost messages (never applied)"
	MetricMismatch  = "entries unlike what was sent"
	MetricOrder     = "groups applied in send order"
	MetricComplete  = "groups with every seq 1..n once"
	MetricRecords   = "dedup records COMPLETED"
	MetricQueue     = "queue empty (visible+in flight+delayed)"
	MetricDLQ       = "DLQ holds exactly the poison messages"
	MetricGraceful  = "SIGTERM: exit 0 within the shutdown timeout"
	maxProblemsKind = 20
)

// problems collects violations, at most maxProblemsKind of each kind.
type problems struct {
	out   []string
	kinds map[string]int
	keys  []string
	seen  map[string]bool
}

func (p *problems) key(k string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if !p.seen[k] {
		p.seen[k] = true
		p.keys = append(p.keys, k)
	}
}

func (p *problems) add(kind, format string, args ...any) {
	if p.kinds == nil {
		p.kinds = map[string]int{}
	}
	p.kinds[kind]++
	if p.kinds[kind] <= maxProblemsKind {
		p.out = append(p.out, kind+": "+fmt.Sprintf(format, args...))
	}
}

func (p *problems) list() []string {
	out := p.out
	kinds := make([]string, 0, len(p.kinds))
	for k := range p.kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if n := p.kinds[k]; n > maxProblemsKind {
			out = append(out, fmt.Sprintf("%s: ... and %d more", k, n-maxProblemsKind))
		}
	}
	return out
}

// Verify checks o against what the plan sent: every balance is the sum sent
// once, every deposit was applied exactly once and in its group's send
// order, the queue is empty and the DLQ holds exactly the poison messages.
func Verify(p Plan, o Observed) Report {
	var (
		rows []Row
		pr   problems
	)
	row := func(metric string, want, got any, ok bool) {
		rows = append(rows, Row{Metric: metric, Expected: fmt.Sprint(want), Actual: fmt.Sprint(got), OK: ok})
	}

	// What was sent once, per group.
	type groupWant struct{ sum, n, lastSeq int64 }
	want := map[string]*groupWant{}
	for _, g := range p.Groups {
		want[g] = &groupWant{}
	}
	byKey := map[string]int{}
	bySeq := map[string]int{} // group#seq -> deposit
	for i, d := range p.Deposits {
		w := want[d.Group]
		w.sum += d.Amount
		w.n = max(w.n, d.Seq)
		if !d.NoSeq {
			w.lastSeq = max(w.lastSeq, d.Seq) // the ledger keeps last_seq only for bodies with seq
		}
		byKey[d.Key] = i
		bySeq[d.Group+"#"+strconv.FormatInt(d.Seq, 10)] = i
	}

	// Accounts.
	seen := map[string]bool{}
	balOK, appliedOK, seqOK := 0, 0, 0
	for _, a := range o.Accounts {
		seen[a.Name] = true
		w, ok := want[a.Name]
		if !ok {
			pr.add("unexpected account", "%s (balance %d, applied %d): nothing was sent to it", a.Name, a.Balance, a.Applied)
			continue
		}
		if a.Balance == w.sum {
			balOK++
		} else {
			pr.add("wrong balance", "account %s: balance %d, sent once %d (%+d)", a.Name, a.Balance, w.sum, a.Balance-w.sum)
		}
		if a.Applied == w.n {
			appliedOK++
		} else {
			pr.add("wrong applied count", "account %s: applied %d, deposits %d", a.Name, a.Applied, w.n)
		}
		if a.LastSeq == w.lastSeq {
			seqOK++
		} else {
			pr.add("wrong last_seq", "account %s: last_seq %d, last seq sent %d", a.Name, a.LastSeq, w.lastSeq)
		}
	}
	for _, g := range p.Groups {
		if !seen[g] {
			pr.add("missing account", "%s: %d deposits sent, no account item", g, want[g].n)
		}
	}
	row(MetricAccounts, len(p.Groups), len(o.Accounts), len(o.Accounts) == len(p.Groups) && allSeen(p.Groups, seen))
	row(MetricBalances, len(p.Groups), balOK, balOK == len(p.Groups) && len(o.Accounts) == len(p.Groups))
	row(MetricApplied, len(p.Groups), appliedOK, appliedOK == len(p.Groups) && len(o.Accounts) == len(p.Groups))
	row(MetricLastSeq, len(p.Groups), seqOK, seqOK == len(p.Groups) && len(o.Accounts) == len(p.Groups))

	// Entries: each deposit exactly once, as sent.
	counts := make([]int, len(p.Deposits))
	perGroup := map[string][]Entry{}
	mismatched := 0
	for _, e := range o.Entries {
		i, ok := byKey[e.Key]
		if !ok {
			// Keyed by something else (a dedup id, a message id): match it
			// by what it applied.
			i, ok = bySeq[e.Group+"#"+strconv.FormatInt(e.Seq, 10)]
		}
		if !ok {
			mismatched++
			pr.add("unknown entry", "%s: group %q seq %d amount %d matches no deposit", e.PK, e.Group, e.Seq, e.Amount)
			continue
		}
		d := p.Deposits[i]
		counts[i]++
		if d.NoSeq && e.Seq == 0 {
			e.Seq = d.Seq // order by the seq the plan gave it
		}
		if e.Key != d.Key || e.Account != d.Group || e.Group != d.Group || e.Seq != d.Seq || e.Amount != d.Amount {
			mismatched++
			pr.add("entry unlike its deposit", "%s: key %q account %q group %q seq %d amount %d; sent key %q group %q seq %d amount %d",
				e.PK, e.Key, e.Account, e.Group, e.Seq, e.Amount, d.Key, d.Group, d.Seq, d.Amount)
		}
		perGroup[d.Group] = append(perGroup[d.Group], e)
	}
	dlqBodies := map[string]bool{}
	for _, m := range o.DLQMessages {
		dlqBodies[m.Body] = true
	}
	once, doubled, lost := 0, 0, 0
	for i, n := range counts {
		d := p.Deposits[i]
		switch {
		case n == 1:
			once++
		case n == 0:
			lost++
			where := "not in the DLQ either"
			if dlqBodies[d.Body] {
				where = "it is in the DLQ"
			}
			pr.add("lost", "group %s seq %d (key %s) was never applied; %s", d.Group, d.Seq, d.Key, where)
			pr.key(d.Key)
		default:
			doubled += n - 1
			pr.add("doubled", "group %s seq %d (key %s) applied %d times", d.Group, d.Seq, d.Key, n)
			pr.key(d.Key)
		}
	}
	row(MetricOnce, len(p.Deposits), once, once == len(p.Deposits))
	row(MetricDoubled, 0, doubled, doubled == 0)
	row(MetricLost, 0, lost, lost == 0)
	row(MetricMismatch, 0, mismatched, mismatched == 0)

	// Order: by applied_at, each group's seqs must increase; and every seq
	// 1..n is there once. Entries applied in the same millisecond cannot be
	// told apart and count as in order.
	inOrder, complete := 0, 0
	for _, g := range p.Groups {
		es := perGroup[g]
		sort.SliceStable(es, func(i, j int) bool {
			if es[i].AppliedAt != es[j].AppliedAt {
				return es[i].AppliedAt < es[j].AppliedAt
			}
			return es[i].Seq < es[j].Seq
		})
		ordered := true
		for i := 1; i < len(es); i++ {
			if es[i].Seq <= es[i-1].Seq {
				ordered = false
				pr.add("order", "group %s: seq %d applied at %d, after seq %d applied at %d",
					g, es[i].Seq, es[i].AppliedAt, es[i-1].Seq, es[i-1].AppliedAt)
				pr.key(es[i-1].Key)
				pr.key(es[i].Key)
				break
			}
		}
		if ordered {
			inOrder++
		}
		if int64(len(es)) == want[g].n && ordered && len(es) > 0 && es[0].Seq == 1 && es[len(es)-1].Seq == want[g].n {
			complete++ // n strictly increasing seqs from 1 to n: each exactly once
		}
	}
	row(MetricOrder, len(p.Groups), inOrder, inOrder == len(p.Groups))
	row(MetricComplete, len(p.Groups), complete, complete == len(p.Groups))

	// Dedup records: every deposit's COMPLETED; no poison message's.
	done := 0
	for _, d := range p.Deposits {
		st := o.Records[d.Key].Status
		if st == "COMPLETED" {
			done++
		} else {
			pr.add("dedup record", "key %s: status %q, want COMPLETED", d.Key, st)
			pr.key(d.Key)
		}
	}
	poisonDone := 0
	for _, s := range p.Poison {
		if o.Records[s.Key].Status == "COMPLETED" {
			poisonDone++
			pr.add("dedup record", "poison key %s is COMPLETED: a rejected message was acknowledged", s.Key)
			pr.key(s.Key)
		}
	}
	row(MetricRecords, len(p.Deposits), done, done == len(p.Deposits) && poisonDone == 0)

	// Queues.
	row(MetricQueue, 0, o.Queue.Total(), o.Queue.Total() == 0)
	if o.Queue.Total() != 0 {
		pr.add("queue not empty", "%d visible, %d in flight, %d delayed", o.Queue.Visible, o.Queue.InFlight, o.Queue.Delayed)
	}
	wantDLQ := map[string]int{}
	for _, s := range p.Poison {
		wantDLQ[s.Group+"\x00"+s.Body]++
	}
	dlqOK := true
	for _, m := range o.DLQMessages {
		k := m.Group + "\x00" + m.Body
		if wantDLQ[k] > 0 {
			wantDLQ[k]--
			continue
		}
		dlqOK = false
		what := "not a poison message"
		if i, ok := byKey[depositKeyOfBody(p, m.Body)]; ok {
			what = fmt.Sprintf("deposit group %s seq %d", p.Deposits[i].Group, p.Deposits[i].Seq)
			pr.key(p.Deposits[i].Key)
		}
		pr.add("unexpected in DLQ", "message %s group %s dedup id %s: %s", m.MessageID, m.Group, m.DedupID, what)
	}
	for _, s := range p.Poison {
		if wantDLQ[s.Group+"\x00"+s.Body] > 0 {
			wantDLQ[s.Group+"\x00"+s.Body]--
			dlqOK = false
			pr.add("poison not in DLQ", "group %s (dedup id %s)", s.Group, s.DedupID)
			pr.key(s.Key)
		}
	}
	if o.DLQ.Total() > int64(len(o.DLQMessages)) {
		dlqOK = false
		pr.add("unexpected in DLQ", "the DLQ counted %d messages but %d could be read", o.DLQ.Total(), len(o.DLQMessages))
	}
	row(MetricDLQ, len(p.Poison), len(o.DLQMessages), dlqOK)

	// Graceful stops.
	if len(o.Stops) > 0 {
		good := 0
		for _, s := range o.Stops {
			if s.ExitCode == 0 && s.Took <= s.Limit {
				good++
			} else {
				pr.add("graceful stop", "%s: exit code %d after %s (limit %s)", s.Worker, s.ExitCode, s.Took.Round(time.Millisecond), s.Limit)
			}
		}
		row(MetricGraceful, len(o.Stops), good, good == len(o.Stops))
	}
	return Report{Rows: rows, Problems: pr.list(), Keys: pr.keys}
}

func allSeen(groups []string, seen map[string]bool) bool {
	for _, g := range groups {
		if !seen[g] {
			return false
		}
	}
	return true
}

// depositKeyOfBody finds the key of the deposit whose body is body.
func depositKeyOfBody(p Plan, body string) string {
	for _, d := range p.Deposits {
		if d.Body == body {
			return d.Key
		}
	}
	return ""
}

// WriteTable prints rows as a table: metric | expected | actual | ok.
func WriteTable(w io.Writer, rows []Row) {
	head := Row{Metric: "metric", Expected: "expected", Actual: "actual"}
	wm, we, wa := len(head.Metric), len(head.Expected), len(head.Actual)
	for _, r := range rows {
		wm, we, wa = max(wm, len(r.Metric)), max(we, len(r.Expected)), max(wa, len(r.Actual))
	}
	line := func(m, e, a, ok string) {
		fmt.Fprintf(w, "%-*s | %*s | %*s | %s\n", wm, m, we, e, wa, a, ok)
	}
	line(head.Metric, head.Expected, head.Actual, "ok")
	fmt.Fprintf(w, "%s-|-%s-|-%s-|-%s\n", strings.Repeat("-", wm), strings.Repeat("-", we), strings.Repeat("-", wa), "----")
	for _, r := range rows {
		ok := "ok"
		if !r.OK {
			ok = "FAIL"
		}
		line(r.Metric, r.Expected, r.Actual, ok)
	}
}
