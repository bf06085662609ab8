package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/redrive"
)

// TestTailMoveIsAViolation: once the tail's redrives have begun, nothing
// fails; a message SQS's redrive policy moves after a receive made then
// spent its receives with no fault to blame, and the run is red. A move of
// a message last received before is the fault phase's, redriven by the
// tail.
func TestTailMoveIsAViolation(t *testing.T) {
	w, s := judgeWorld(t)
	w.judgeTailMove(s.lid, 3*time.Minute)
	if len(w.violations) > 0 {
		t.Fatalf("a move before the tail judged: %v", w.violations)
	}
	w.redriveFrom = 10 * time.Minute
	w.judgeTailMove(s.lid, 9*time.Minute)
	if len(w.violations) > 0 {
		t.Fatalf("a move of a message last received in the fault phase judged: %v", w.violations)
	}
	w.judgeTailMove(s.lid, 11*time.Minute)
	if len(w.violations) != 1 || !strings.Contains(w.violations[0], "after the faults healed") {
		t.Fatalf("a move in the tail not reported: %v", w.violations)
	}
}

// TestArrivedViaNamesTheCopysDLQMessage: the order check excuses b applied
// before a when both were applied from redrive copies and b's DLQ message
// reached the DLQ first (a DLQ is FIFO too), whatever their first trips to
// the DLQ were: a later message's resent duplicate may be moved by the
// redrive policy before an earlier message's second trip.
func TestArrivedViaNamesTheCopysDLQMessage(t *testing.T) {
	w, s := judgeWorld(t)
	if _, ok := w.arrivedVia(s.lid); ok {
		t.Fatal("a message never applied has a DLQ arrival")
	}
	w.noteArrived("dlq-a", 25*time.Minute)
	w.noteArrived("dlq-a", 31*time.Minute) // seen again: the first sight stands
	w.noteCopy(s.lid, "copy-a", redrive.CopyDeduplicationID("dlq-a", "its receipt"))
	w.appliedVia[s.lid] = "copy-a"
	at, ok := w.arrivedVia(s.lid)
	if !ok || at != 25*time.Minute {
		t.Fatalf("arrivedVia = %s, %v; want +25m0s, true", at, ok)
	}
	w.appliedVia[s.lid] = "first-delivery"
	if _, ok := w.arrivedVia(s.lid); ok {
		t.Fatal("applied from its first delivery, judged applied from a redrive copy")
	}
}

// TestFalseRedsHealInTheTail replays the seeds an earlier judge reported
// red for messages the faults gave no chance (issue 32): with the healed
// tail each is green, its DLQs redriven by the operator after the faults
// stopped, and no move of SQS's redrive policy after that.
func TestFalseRedsHealInTheTail(t *testing.T) {
	if testing.Short() {
		t.Skip("twelve whole runs")
	}
	kinds, err := ParseKinds("")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps("")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{138, 2581, 3723, 3982, 5063, 5095, 5318, 7972, 10502, 12660, 14206, 14811} {
		cfg := Config{Seed: seed, Rate: defaultRate, Kinds: kinds, Ops: ops, Workers: 3, Lambdas: 2, Swarm: true}
		res := runSeed(t, cfg)
		if res.Failed() {
			t.Errorf("seed %d is red: %v", seed, first(res.Violations, 3))
		}
		if res.Stats["tail: redrive rounds"] == 0 {
			t.Errorf("seed %d: no redrive in the tail", seed)
		}
	}
}
