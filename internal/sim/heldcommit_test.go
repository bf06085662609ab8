package sim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A Q1 commit sent after SQS's visibility of every receipt the worker had
// of the message ended is judged: a violation, unless a stall of the
// worker's ended just before the request (the documented window), or the
// worker commits in groups and its visibility ended within the window.
func TestCommitNotHeldJudged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, s := judgeWorld(t)
		w.shape.GroupWindow = time.Second
		time.Sleep(time.Minute)
		now := time.Since(w.start)
		p := w.newProc("w0.3")
		for w.groupCommits(p.id) { // a worker that commits alone
			p = w.newProc(p.id + "0")
		}

		w.receipts["r1"] = &rcpt{proc: p.id, lid: s.lid, until: now + time.Second}
		w.checkHeldAtCommit(p, []string{s.key}, None)
		if len(w.violations) != 0 {
			t.Fatalf("held, yet judged: %v", w.violations)
		}

		w.receipts["r1"].until = now - time.Second
		w.receipts["r2"] = &rcpt{proc: "w9.9", lid: s.lid, until: now + time.Minute} // another's receipt holds nothing for p
		w.checkHeldAtCommit(p, []string{s.key}, None)
		if len(w.violations) != 1 || !strings.Contains(w.violations[0], "commit not held: "+p.id) {
			t.Fatalf("sent past its visibility, yet not judged: %v", w.violations)
		}

		// The request itself froze, or a freeze ended just before it.
		w.violations = nil
		w.checkHeldAtCommit(p, []string{s.key}, Freeze)
		id := "GetItem|outbox|1"
		w.inj.record(Fault{ID: id, Kind: Freeze, At: now - w.inj.delay(id) - time.Millisecond, Proc: p.id})
		w.checkHeldAtCommit(p, []string{s.key}, None)
		if len(w.violations) != 0 {
			t.Fatalf("the documented window judged: %v", w.violations)
		}
	})
}
