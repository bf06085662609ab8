package chaos

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testPlan() Plan {
	return NewPlan(PlanConfig{Deposits: 60, Groups: 6, ExactPct: 10, RetryPct: 10, Poison: 3, Sleepers: 2, SleepMS: 100}, 42)
}

// perfect is what a flawless run leaves behind for p.
func perfect(p Plan) Observed {
	o := Observed{Records: map[string]Record{}}
	sums := map[string]*Account{}
	for _, g := range p.Groups {
		sums[g] = &Account{Name: g}
	}
	for i, d := range p.Deposits {
		a := sums[d.Group]
		a.Balance += d.Amount
		a.Applied++
		seq := int64(0) // the ledger stores seq only when the body has it
		if !d.NoSeq {
			a.LastSeq, seq = d.Seq, d.Seq
		}
		o.Entries = append(o.Entries, Entry{
			PK: "entry#exactly#q.fifo#" + d.Key, Key: d.Key, Account: d.Group, Group: d.Group,
			Seq: seq, Amount: d.Amount, AppliedAt: 1_000_000 + int64(i)*7, MessageID: fmt.Sprintf("m%d", i),
		})
		o.Records[d.Key] = Record{Status: "COMPLETED", Attempts: 1}
	}
	for _, g := range p.Groups {
		o.Accounts = append(o.Accounts, *sums[g])
	}
	for i, s := range p.Poison {
		o.Records[s.Key] = Record{Status: "IN_PROGRESS", Attempts: 3}
		o.DLQMessages = append(o.DLQMessages, DLQMessage{MessageID: fmt.Sprintf("p%d", i), Group: s.Group, DedupID: s.DedupID, Body: s.Body})
	}
	o.DLQ = QueueCounts{Visible: int64(len(p.Poison))}
	o.Stops = []Stop{{Worker: "w1", ExitCode: 0, Took: time.Second, Limit: 10 * time.Second}}
	return o
}

// failing returns the metrics of the rows that do not hold.
func failing(r Report) []string {
	var out []string
	for _, row := range r.Rows {
		if !row.OK {
			out = append(out, row.Metric)
		}
	}
	return out
}

func TestVerifyPassesAFlawlessRun(t *testing.T) {
	t.Parallel()
	p := testPlan()
	r := Verify(p, perfect(p))
	require.True(t, r.OK(), "%v\n%s", failing(r), strings.Join(r.Problems, "\n"))
	require.Empty(t, r.Problems)
	row, ok := r.Row(MetricOnce)
	require.True(t, ok)
	require.Equal(t, "60", row.Expected)
	require.Equal(t, "60", row.Actual)
	row, _ = r.Row(MetricDLQ)
	require.Equal(t, "3", row.Actual)

	// Entries come back from a scan in any order.
	o := perfect(p)
	for i, j := 0, len(o.Entries)-1; i < j; i, j = i+1, j-1 {
		o.Entries[i], o.Entries[j] = o.Entries[j], o.Entries[i]
	}
	require.True(t, Verify(p, o).OK())
}

// Each kind of violation is caught, by the rows that name it.
func TestVerifyCatchesEachViolation(t *testing.T) {
	t.Parallel()
	p := testPlan()
	// Two deposits of one group, for the order and doubling cases.
	var a, b int = -1, -1
	for i, d := range p.Deposits {
		if d.Group == p.Deposits[0].Group && i > 0 {
			a, b = 0, i
			break
		}
	}
	require.GreaterOrEqual(t, b, 1)

	cases := []struct {
		name    string
		mutate  func(o *Observed)
		failing []string
		problem string
	}{
		{
			name: "doubled entry under another key",
			// The retry's effect applied again, keyed by its dedup id:
			// a second entry, and the account counted it.
			mutate: func(o *Observed) {
				e := o.Entries[a]
				e.PK, e.Key, e.AppliedAt = "entry#exactly#q.fifo#"+p.Deposits[a].DedupID+"-retry9", p.Deposits[a].DedupID+"-retry9", o.Entries[len(o.Entries)-1].AppliedAt+1
				o.Entries = append(o.Entries, e)
				acct := accountOf(o, e.Account)
				acct.Balance += e.Amount
				acct.Applied++
			},
			failing: []string{MetricBalances, MetricApplied, MetricOnce, MetricDoubled, MetricMismatch, MetricOrder, MetricComplete},
			problem: "doubled: group " + p.Deposits[a].Group + " seq 1",
		},
		{
			name:    "wrong balance",
			mutate:  func(o *Observed) { accountOf(o, p.Groups[2]).Balance++ },
			failing: []string{MetricBalances},
			problem: "wrong balance: account " + p.Groups[2],
		},
		{
			name: "out-of-order application",
			mutate: func(o *Observed) {
				o.Entries[a].AppliedAt, o.Entries[b].AppliedAt = o.Entries[b].AppliedAt, o.Entries[a].AppliedAt
			},
			failing: []string{MetricOrder, MetricComplete},
			problem: "order: group " + p.Deposits[a].Group,
		},
		{
			name: "lost message",
			mutate: func(o *Observed) {
				o.Entries = append(o.Entries[:b], o.Entries[b+1:]...)
				delete(o.Records, p.Deposits[b].Key)
			},
			failing: []string{MetricOnce, MetricLost, MetricComplete, MetricRecords},
			problem: fmt.Sprintf("lost: group %s seq %d", p.Deposits[b].Group, p.Deposits[b].Seq),
		},
		{
			name: "deposit dead-lettered instead of applied",
			mutate: func(o *Observed) {
				d := p.Deposits[b]
				o.Entries = append(o.Entries[:b], o.Entries[b+1:]...)
				o.Records[d.Key] = Record{Status: "IN_PROGRESS", Attempts: 3}
				o.DLQMessages = append(o.DLQMessages, DLQMessage{MessageID: "x", Group: d.Group, DedupID: d.DedupID, Body: d.Body})
			},
			failing: []string{MetricOnce, MetricLost, MetricComplete, MetricRecords, MetricDLQ},
			problem: "unexpected in DLQ: message x group " + p.Deposits[b].Group,
		},
		{
			name: "unexpected DLQ message",
			mutate: func(o *Observed) {
				o.DLQMessages = append(o.DLQMessages, DLQMessage{MessageID: "y", Group: "g0001", Body: `{"account":"g0001"}`})
			},
			failing: []string{MetricDLQ},
			problem: "unexpected in DLQ: message y group g0001 dedup id : not a poison message",
		},
		{
			name:    "poison message not dead-lettered",
			mutate:  func(o *Observed) { o.DLQMessages = o.DLQMessages[1:] },
			failing: []string{MetricDLQ},
			problem: "poison not in DLQ: group " + p.Poison[0].Group,
		},
		{
			name:    "DLQ holds more than could be read",
			mutate:  func(o *Observed) { o.DLQ.InFlight = 2 },
			failing: []string{MetricDLQ},
		},
		{
			name:    "poison acknowledged",
			mutate:  func(o *Observed) { o.Records[p.Poison[1].Key] = Record{Status: "COMPLETED"} },
			failing: []string{MetricRecords},
			problem: "is COMPLETED",
		},
		{
			name:    "queue not empty",
			mutate:  func(o *Observed) { o.Queue.InFlight = 1 },
			failing: []string{MetricQueue},
		},
		{
			name: "entry with another amount",
			mutate: func(o *Observed) {
				o.Entries[b].Amount++
			},
			failing: []string{MetricMismatch},
			problem: "entry unlike its deposit",
		},
		{
			name: "entry of nothing sent",
			mutate: func(o *Observed) {
				o.Entries = append(o.Entries, Entry{PK: "entry#zz", Key: "zz", Group: "g9999", Seq: 1, Amount: 5})
			},
			failing: []string{MetricMismatch},
			problem: "unknown entry",
		},
		{
			name: "account nobody sent to, account missing",
			mutate: func(o *Observed) {
				o.Accounts[0].Name = "intruder"
			},
			failing: []string{MetricAccounts, MetricBalances, MetricApplied, MetricLastSeq},
			problem: "missing account: " + p.Groups[0],
		},
		{
			name:    "last_seq behind",
			mutate:  func(o *Observed) { o.Accounts[1].LastSeq-- },
			failing: []string{MetricLastSeq},
		},
		{
			name: "SIGTERM exit code",
			mutate: func(o *Observed) {
				o.Stops = append(o.Stops, Stop{Worker: "w2", ExitCode: 1, Took: time.Second, Limit: 10 * time.Second})
			},
			failing: []string{MetricGraceful},
			problem: "graceful stop: w2: exit code 1",
		},
		{
			name:    "SIGTERM too slow",
			mutate:  func(o *Observed) { o.Stops[0].Took = 11 * time.Second },
			failing: []string{MetricGraceful},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := perfect(p)
			c.mutate(&o)
			r := Verify(p, o)
			require.False(t, r.OK())
			require.ElementsMatch(t, c.failing, failing(r), "%s", strings.Join(r.Problems, "\n"))
			require.NotEmpty(t, r.Problems)
			if c.problem != "" {
				require.Contains(t, strings.Join(r.Problems, "\n"), c.problem)
			}
		})
	}
}

func accountOf(o *Observed, name string) *Account {
	for i := range o.Accounts {
		if o.Accounts[i].Name == name {
			return &o.Accounts[i]
		}
	}
	panic("no account " + name)
}

func TestVerifyCapsProblemsPerKind(t *testing.T) {
	t.Parallel()
	p := NewPlan(PlanConfig{Deposits: 100, Groups: 2}, 1)
	o := perfect(p)
	o.Entries = nil
	r := Verify(p, o)
	lost := 0
	for _, s := range r.Problems {
		if strings.HasPrefix(s, "lost: group") {
			lost++
		}
	}
	require.Equal(t, maxProblemsKind, lost)
	require.Contains(t, r.Problems, fmt.Sprintf("lost: ... and %d more", 100-maxProblemsKind))
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	WriteTable(&buf, []Row{{"a metric", "10", "10", true}, {"b", "0", "3", false}})
	require.Equal(t, ""+
		"metric   | expected | actual | ok\n"+
		"---------|----------|--------|-----\n"+
		"a metric |       10 |     10 | ok\n"+
		"b        |        0 |      3 | FAIL\n", buf.String())
}

// Without seq in the bodies the ledger guards nothing: doubles and order
// violations are applied, and the verifier still sees them.
func TestVerifyWithoutSeq(t *testing.T) {
	t.Parallel()
	p := NewPlan(PlanConfig{Deposits: 40, Groups: 4, RetryPct: 20, Poison: 1, NoSeq: true}, 3)
	for _, d := range p.Deposits {
		require.NotContains(t, d.Body, "seq")
	}
	r := Verify(p, perfect(p))
	require.True(t, r.OK(), "%v\n%s", failing(r), strings.Join(r.Problems, "\n"))

	// Workers that do not share a namespace apply a redelivery again under
	// another scoped key: same raw key, two entries.
	o := perfect(p)
	e := o.Entries[5]
	e.PK = "entry#other#q.fifo#" + e.Key
	e.AppliedAt = o.Entries[len(o.Entries)-1].AppliedAt + 1
	o.Entries = append(o.Entries, e)
	accountOf(&o, e.Account).Balance += e.Amount
	accountOf(&o, e.Account).Applied++
	r = Verify(p, o)
	require.ElementsMatch(t, []string{MetricBalances, MetricApplied, MetricOnce, MetricDoubled, MetricOrder, MetricComplete}, failing(r))

	// Two deposits of a group applied in the wrong order.
	o = perfect(p)
	var first, second = -1, -1
	for i, d := range p.Deposits {
		if d.Group == p.Deposits[0].Group && d.Seq == 2 {
			first, second = 0, i
		}
	}
	o.Entries[first].AppliedAt, o.Entries[second].AppliedAt = o.Entries[second].AppliedAt, o.Entries[first].AppliedAt
	r = Verify(p, o)
	require.ElementsMatch(t, []string{MetricOrder, MetricComplete}, failing(r))
	require.Contains(t, strings.Join(r.Problems, "\n"), "order: group "+p.Deposits[0].Group+": seq 1 applied at")
}
