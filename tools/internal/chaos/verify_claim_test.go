package chaos

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDownstreamCountsEveryCallByKey(t *testing.T) {
	t.Parallel()
	d, err := NewDownstream()
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	post := func(worker, key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, d.URL(worker), strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "exactly#q.fifo#"+key)
		req.Header.Set("X-Message-Group-Id", "g1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 200, post("w1", "k-g1-1", `{"account":"g1","amount_cents":5,"seq":1}`))
	require.Equal(t, 200, post("w2", "k-g1-1", `{"account":"g1","amount_cents":5,"seq":1}`))
	require.Equal(t, 400, post("w2", "k-p", `{"account":"p","amount_cents":"lots","seq":1}`))
	cs := d.Calls()
	require.Len(t, cs, 3)
	require.Equal(t, Call{N: 1, At: cs[0].At, Worker: "w1", Key: "k-g1-1", Group: "g1", Seq: 1, Status: 200}, cs[0])
	require.Equal(t, "w2", cs[1].Worker)
	require.Equal(t, 400, cs[2].Status)
}

func TestVerifyClaimExcusesOnlyTheWindowBetweenEffectAndCommit(t *testing.T) {
	t.Parallel()
	p := NewPlan(PlanConfig{Deposits: 6, Groups: 2}, 1)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var calls []Call
	o := Observed{Records: map[string]Record{}}
	for i, d := range p.Deposits {
		calls = append(calls, Call{N: len(calls) + 1, At: at(i), Worker: "w1", Key: d.Key, Group: d.Group, Seq: d.Seq, Status: 200})
		o.Records[d.Key] = Record{Status: "COMPLETED"}
	}
	d0, d1, d2 := p.Deposits[0], p.Deposits[1], p.Deposits[2]
	// d0: w1 was killed after its call: excused. d1: w1's commit failed:
	// excused. d2: w1 completed, then another call: not excused.
	calls = append(calls,
		Call{N: len(calls) + 1, At: at(20), Worker: "w2", Key: d0.Key, Group: d0.Group, Seq: d0.Seq, Status: 200},
		Call{N: len(calls) + 2, At: at(21), Worker: "w2", Key: d1.Key, Group: d1.Group, Seq: d1.Seq, Status: 200},
		Call{N: len(calls) + 3, At: at(22), Worker: "w2", Key: d2.Key, Group: d2.Group, Seq: d2.Seq, Status: 200})
	actions := []Action{{Worker: "w1", Kind: "SIGKILL", Start: at(0).Add(time.Millisecond), End: at(0).Add(time.Millisecond)}}
	marks := map[string][]Mark{
		d1.Key: {{At: at(1).Add(time.Millisecond), Worker: "w1", Event: "complete", Fault: "throttle"}},
		d2.Key: {{At: at(2).Add(time.Millisecond), Worker: "w1", Event: "complete", Fault: "pass", OK: true},
			{At: at(3), Worker: "w3", Event: "extend", Fault: "500"}},
	}
	rep, excused := VerifyClaim(p, o, calls, Excuses(actions, func(k string) []Mark { return marks[k] }), false)
	require.False(t, rep.OK())
	row, _ := rep.Row(MetricDoublesBad)
	require.Equal(t, "1", row.Actual)
	row, _ = rep.Row(MetricDoublesOK)
	require.Equal(t, "2", row.Actual)
	require.Equal(t, map[string]int{"SIGKILL": 1, "complete throttle": 1}, excused)
	require.Equal(t, []string{d2.Key}, rep.Keys)

	// A later call by a worker frozen since its claim is excused; one by a
	// worker whose claim only took effect after the stall (a delayed put)
	// is not.
	late := Call{N: 100, At: at(30), Worker: "w3", Key: d0.Key, Group: d0.Group, Seq: d0.Seq, Status: 200}
	first := Call{N: 99, At: at(25), Worker: "w2", Key: d0.Key, Group: d0.Group, Seq: d0.Seq, Status: 200}
	stop := []Action{{Worker: "w3", Kind: "SIGSTOP", Start: at(24), End: at(29)}}
	claimedAt := func(s int) func(string) []Mark {
		return func(string) []Mark {
			return []Mark{
				{At: at(s), Worker: "w3", Event: "claim", Fault: "pass", OK: true},
				{At: at(26), Worker: "w2", Event: "complete", Fault: "pass", OK: true},
			}
		}
	}
	require.Equal(t, "w3 SIGSTOP holding its claim at 00:00:24.000", Excuses(stop, claimedAt(23))(first, late))
	require.Empty(t, Excuses(stop, claimedAt(29))(first, late), "a claim applied after the stall, then a call: not excused")

	// A call on a claim that won with its lease over is the late-claim bug.
	lateMarks := func(string) []Mark {
		return []Mark{{At: at(29), Worker: "w3", Event: "claim", Fault: "pass+held", OK: true, Late: true}}
	}
	why := Excuses(nil, lateMarks)(first, late)
	require.True(t, strings.HasPrefix(why, LateClaim), why)
	lp := p
	lp.Deposits = p.Deposits[:1]
	lp.Groups = []string{d0.Group}
	lp.Poison = nil
	lcalls := []Call{first, late}
	lo := Observed{Records: map[string]Record{d0.Key: {Status: "COMPLETED"}}}
	rep, _ = VerifyClaim(lp, lo, lcalls, Excuses(nil, lateMarks), false)
	row, _ = rep.Row(MetricDoublesLate)
	require.Equal(t, "1", row.Actual)
	require.False(t, row.OK)
	rep, _ = VerifyClaim(lp, lo, lcalls, Excuses(nil, lateMarks), true)
	row, _ = rep.Row(MetricDoublesLate)
	require.True(t, row.OK, "-allow-late-claims counts them without failing")
	require.True(t, rep.OK())
	row, _ = rep.Row(MetricCalled)
	require.True(t, row.OK)
	row, _ = rep.Row(MetricCallOrder)
	require.True(t, row.OK, "repeat calls do not count for the order")

	// A group whose first calls come out of seq order fails.
	g := append([]Call(nil), calls[:len(p.Deposits)]...)
	for i, j := 0, len(g)-1; i < j; i, j = i+1, j-1 {
		g[i].N, g[j].N = g[j].N, g[i].N
	}
	rep, _ = VerifyClaim(p, o, g, Excuses(nil, func(string) []Mark { return nil }), false)
	row, _ = rep.Row(MetricCallOrder)
	require.False(t, row.OK)
}
