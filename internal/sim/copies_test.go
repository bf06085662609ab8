package sim

import (
	"strconv"
	"testing"
	"time"
)

// judgeWorld is a world with one group of two Q1 messages, for the
// judges' unit tests: no fakes, no processes running.
func judgeWorld(t *testing.T) (*world, *msgSpec) {
	t.Helper()
	w := &world{start: time.Now(), stats: map[string]int{}, trace: map[int][]string{}, applied: map[int]int{},
		callers: map[int][]string{}, appliedAt: map[int]time.Duration{}, appliedVia: map[int]string{}, byKey: map[string]*msgSpec{}, byLid: map[int]*msgSpec{},
		wide: newWidened(1), copies: newCopies(), receipts: map[string]*rcpt{}}
	w.shape = fixedShape(Config{})
	w.shape.Vis1 = time.Minute
	ops, _ := ParseOps("")
	w.inj = newInjector(1, 0, map[Kind]bool{}, ops, nil)
	w.inj.stall = w.shape.Vis1
	for lid := 1; lid <= 2; lid++ {
		s := &msgSpec{lid: lid, queue: q1Name, group: "g0", gseq: lid - 1, key: "sim#q1#g0#d" + strconv.Itoa(lid)}
		w.msgs = append(w.msgs, s)
		w.byLid[lid], w.byKey[s.key] = s, s
	}
	return w, w.msgs[1]
}

// TestAppliedFromCopyIsTheRunsDelivery: a process held a resent duplicate
// (a new message to SQS) and a redrive copy of one message in its lane and
// applied the duplicate, no delete seen after. The judge must take the
// delivery the effect ran for, not "a copy received before the commit",
// else the message counts as redriven and the order check fails on a group
// in order.
func TestAppliedFromCopyIsTheRunsDelivery(t *testing.T) {
	w, s := judgeWorld(t)
	x := w.copies
	x.recvs["dup"] = []delivery{{at: 10 * time.Second, proc: "w1.1"}}
	x.recvs["copy"] = []delivery{{at: 10 * time.Second, proc: "w1.1"}}
	x.ids[s.lid] = []string{"copy"}
	w.callers[s.lid], w.appliedAt[s.lid] = []string{"w1.1"}, 30*time.Second

	w.appliedVia[s.lid] = "dup"
	if w.appliedFromCopy(s.lid) {
		t.Fatal("applied from the resent duplicate, judged applied from the redrive copy")
	}
	w.appliedVia[s.lid] = "copy"
	if !w.appliedFromCopy(s.lid) {
		t.Fatal("applied from the redrive copy, not judged so")
	}
}

// TestFailedAgainBeforeIsWithinOneRedriveRun: a redrive run sent message 1
// back, it failed again (the product dead-lettered it anew), then the run
// sent message 2's copy: 2 may go ahead of 1, as behind any message a worker
// dead-letters. A message that failed
// again after an earlier run is one this run found in the DLQ: its group
// waits for it, and 2 going ahead is a broken order.
func TestFailedAgainBeforeIsWithinOneRedriveRun(t *testing.T) {
	for _, c := range []struct {
		name, first string
		want        bool
	}{{"the same run", "redrive.operator.2", true}, {"an earlier run", "redrive.0", false}} {
		t.Run(c.name, func(t *testing.T) {
			w := &world{moveEvt: map[int][]int{}, redriveEvt: map[int][]evtBy{}, copyEvt: map[string]evtBy{}}
			w.redriveEvt[1] = []evtBy{{1, c.first}}
			w.moveEvt[1] = []int{2}
			w.copyEvt["copy-of-2"] = evtBy{3, "redrive.operator.2"}
			if got := w.failedAgainBefore(1, "copy-of-2"); got != c.want {
				t.Fatalf("failedAgainBefore = %v, want %v", got, c.want)
			}
			if w.failedAgainBefore(1, "unknown") {
				t.Fatal("a copy the world did not see sent")
			}
		})
	}
}
