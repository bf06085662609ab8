package sim

import (
	"strings"
	"testing"
	"time"
)

// A Reordered hold read from sequence numbers, "SQS had message 2 before
// message 1", where message 1's number is that of a copy SQS took anew
// (its first copy, below message 2's, had left the five-minute
// deduplication window) is a false hold of a known kind, counted; when
// the number is message 1's only copy's, the hold stays judged false.
func TestGroupBatchHoldOnACopyTakenAnew(t *testing.T) {
	held := func(seqs1 []string) *world {
		w := &world{start: time.Now(), stats: map[string]int{}}
		o := &obHalf{w: w, s: obShape{GroupBatch: 10}, gb: newGB(), byGroup: map[string][]*msgSpec{},
			published: map[int]bool{}, dropped: map[int]bool{}}
		for lid := 1; lid <= 2; lid++ {
			s := &msgSpec{lid: lid, group: "o3", gseq: lid - 1, dedupID: "k" + string(rune('0'+lid))}
			o.byGroup["o3"] = append(o.byGroup["o3"], s)
			o.published[lid] = true
			o.gbFirst(lid)
		}
		o.gb.seqs["k1"], o.gb.seqs["k2"] = seqs1, []string{"20"}
		o.gbHeld("o3", 2, "Reordered: SQS had message 2 before message 1 (sequence numbers 20 and 30), from an earlier request whose answer was lost; its consumers may have got them out of order")
		return w
	}
	w := held([]string{"10", "30"})
	if len(w.violations) > 0 || w.stats["outbox group batch: false hold: an earlier message's copy taken anew past the five-minute deduplication window, a later one's answered as a duplicate (known)"] != 1 {
		t.Fatalf("message 1's copy taken anew (first 10, then 30): want the known false hold counted; violations %v, stats %v", w.violations, w.stats)
	}
	w = held([]string{"30"})
	if len(w.violations) != 1 || !strings.Contains(w.violations[0], "false hold") {
		t.Fatalf("30 is message 1's only copy: want a false hold judged; violations %v", w.violations)
	}
}
