package sim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A lease a worker counts on is judged against what the ledger took under
// its token: up to the record's millisecond precision it may pass it, a
// millisecond more is a violation (F4: a recovered claim that kept its
// retry's lease), and so is a token the ledger never took.
func TestLeaseBeliefJudged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, s := judgeWorld(t)
		p := w.newProc("w0.1")
		truth := time.Now().Add(time.Minute).Truncate(time.Millisecond)
		w.leaseTaken("tok1", truth.UnixMilli())

		w.checkLeaseBelief(p, s.key, "tok1", truth.Add(leaseSlack-time.Nanosecond))
		w.checkLeaseBelief(p, s.key, "tok1", truth.Add(-time.Second))
		if len(w.violations) != 0 {
			t.Fatalf("a belief within the record's lease judged: %v", w.violations)
		}

		w.checkLeaseBelief(p, s.key, "tok1", truth.Add(leaseSlack))
		if len(w.violations) != 1 || !strings.Contains(w.violations[0], "belief: a lease believed longer than the ledger's: w0.1") {
			t.Fatalf("a belief past the record's lease not judged: %v", w.violations)
		}

		// An extension the ledger took moves the truth; a release ends it.
		w.violations = nil
		w.leaseTaken("tok1", truth.Add(time.Minute).UnixMilli())
		w.checkLeaseBelief(p, s.key, "tok1", truth.Add(time.Minute))
		w.leaseTaken("tok1", 0)
		w.checkLeaseBelief(p, s.key, "tok1", truth)
		w.checkLeaseBelief(p, s.key, "tok2", truth)
		if len(w.violations) != 2 || !strings.Contains(w.violations[0], "believed longer") || !strings.Contains(w.violations[1], "which the ledger never took") {
			t.Fatalf("a belief after the release, or under an unknown token, not judged: %v", w.violations)
		}
	})
}

// A visibility deadline the pool counts on is judged against SQS's grant
// to the receipt, exactly (B1: an extension dated at its answer).
func TestVisibilityBeliefJudged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, s := judgeWorld(t)
		p := w.newProc("w0.1")
		time.Sleep(time.Minute)
		now := time.Since(w.start)
		w.receipts["r1"] = &rcpt{proc: p.id, lid: s.lid, msgID: "m1", until: now + 30*time.Second}

		w.checkVisibilityBelief(p, "r1", time.Now().Add(30*time.Second))
		w.checkVisibilityBelief(p, "r1", time.Now().Add(time.Second))
		w.checkVisibilityBelief(p, "r9", time.Now().Add(time.Hour)) // no grant seen: counted, not judged
		if len(w.violations) != 0 {
			t.Fatalf("a belief within SQS's deadline judged: %v", w.violations)
		}
		if w.stats["sim: visibility beliefs of receipts SQS granted no visibility to"] != 1 {
			t.Fatalf("a receipt SQS never granted not counted: %v", w.stats)
		}

		w.checkVisibilityBelief(p, "r1", time.Now().Add(30*time.Second+time.Nanosecond))
		if len(w.violations) != 1 || !strings.Contains(w.violations[0], "belief: a visibility believed longer than SQS's: w0.1 counts on holding message m1") {
			t.Fatalf("a belief past SQS's deadline not judged: %v", w.violations)
		}
	})
}

// A visibility change's answer comes back 1 to 30 ms after it took effect,
// the same for a replay, sooner when the call's context ends.
func TestVisibilityChangeAnswersTakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _ := judgeWorld(t)
		took := func(ctx context.Context, id string) time.Duration {
			start := time.Now()
			w.answerTakesTime(ctx, id)
			return time.Since(start)
		}
		seen := map[time.Duration]bool{}
		for _, id := range []string{"a|1", "a|2", "a|3", "a|4"} {
			d := took(context.Background(), id)
			if d < time.Millisecond || d >= answerLatency {
				t.Fatalf("answer of %s took %s", id, d)
			}
			if took(context.Background(), id) != d {
				t.Fatalf("answer of %s took otherwise the second time", id)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("every answer took as long: %v", seen)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if d := took(ctx, "a|1"); d != 0 {
			t.Fatalf("an answer on an ended context took %s", d)
		}
	})
}
