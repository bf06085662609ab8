package sim

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/outbox"
)

// Relay.GroupBatch in the outbox worlds (outboxworld.go). In half the
// outbox seeds the relays put up to GroupBatch (2 to 10) of a group's
// messages in one SendMessageBatch, and the groups are hot: their messages
// come in bursts, so that runs of several messages per request happen.
// The mode's guarantee is narrower than the default's (docs/OUTBOX.md, "A
// hot group"), and it is judged exactly:
//   - a group's first copies reach SQS in write order, except where SQS
//     failed an entry and took a later one of the same group in the same
//     request (the injector's Partial fault fails entries at random). Such
//     a break is recorded, not reported, when it happens;
//   - a break caused by the queue's MaximumMessageSize (the fake refused an
//     entry for its size and took a later one of its group in the same
//     request) is a violation: the relay cuts runs so that a size limit
//     refuses a suffix;
//   - every break is detected: the group shows held with a reason
//     beginning with outbox.ReorderedHold (the operator sees it, then
//     releases the group or drops the held message), unless the break's
//     answer was lost and no relay got an answer taking a copy of the
//     message SQS took out of order within SQS's five-minute deduplication
//     window, after SQS took the earlier one (the relay keeps the group's
//     last sequence number on its head: any such answer shows the break,
//     whatever request, round or relay carries it); a break never
//     detected is a violation;
//   - a Reordered hold with no break of its group behind it is a violation
//     (a false hold);
//   - a relay round that got SQS's per-entry answer showing a break counts
//     it in Round.Reordered; and the rounds count every Reordered hold;
//   - a partial answer (entries failed, others taken) is lost now and then
//     (gbSQS), so that the detection from sequence numbers on the next
//     attempt is exercised.
//
// The consumer half's order check excuses b applied before a when SQS had
// b's first copy before a's: that break was judged here.

// gbState is what the outbox half knows of GroupBatch's breaks; o.mu
// guards it.
type gbState struct {
	breaks   []*gbBreak
	holds    map[string]bool            // Reordered holds seen: group|seq|why
	firstPub map[int]int                // lid -> place of its first copy at SQS
	sends    map[string][]time.Duration // dedup id -> when a copy reached the fake
	answered map[string]int             // process -> groups broken in answers it got this round
	counted  int                        // Round.Reordered, summed
	attempts map[string]int             // partial answers per first dedup id (lost or not, drawn)
	okAt     map[string][]time.Duration // dedup id -> when a relay got an answer taking a copy of it
	takenAt  map[string]time.Duration   // dedup id -> when SQS took its first copy
	seqs     map[string][]string        // dedup id -> SQS's sequence numbers of the copies it took anew, in order
}

type gbBreak struct {
	group          string
	refused, taken *msgSpec
	at             time.Duration
	detected       bool
}

func newGB() *gbState {
	return &gbState{holds: map[string]bool{}, firstPub: map[int]int{}, sends: map[string][]time.Duration{},
		answered: map[string]int{}, attempts: map[string]int{}, okAt: map[string][]time.Duration{}, takenAt: map[string]time.Duration{}, seqs: map[string][]string{}}
}

// drawGroupBatch draws the relays' GroupBatch and hot groups for half the
// outbox seeds.
func (o obShape) drawGroupBatch(pick func(name string, n int) int) obShape {
	if !o.On || o.Pages || pick("ob groupbatch", 2) != 0 {
		return o
	}
	o.GroupBatch = 2 + pick("ob groupbatch n", 9)
	o.Msgs += 3 + pick("ob hot msgs", 4)
	if o.OneQueue {
		o.Msgs = 5
	}
	if o.PerGroup == 1 {
		o.PerGroup = 10 // one message per group read: no run
	}
	return o
}

func (o obShape) gbChoices() []string {
	if o.GroupBatch == 0 {
		return nil
	}
	return []string{fmt.Sprintf("outbox group batch=%d (hot groups)", o.GroupBatch)}
}

// gap is the time between a group's writes: in hot groups (GroupBatch),
// three in four come at once, a burst.
func (o obShape) gap(r func(parts ...string) uint64, lid int) time.Duration {
	if o.GroupBatch > 1 && r("burst", strconv.Itoa(lid))%4 != 0 {
		return 0
	}
	return time.Duration(5+r("gap", strconv.Itoa(lid))%60) * time.Second
}

// gbBroke records a break: SQS took taken's first copy while refused, an
// earlier message of its group, was neither published nor dropped. o.mu
// held.
func (o *obHalf) gbBroke(refused, taken *msgSpec) {
	o.gb.breaks = append(o.gb.breaks, &gbBreak{group: taken.group, refused: refused, taken: taken, at: time.Since(o.w.start)})
	o.w.stat("outbox group batch: breaks at SQS (a later message taken after an earlier one was refused)", 1)
}

// gbFirst records the place of lid's first copy at SQS. o.mu held.
func (o *obHalf) gbFirst(lid int) {
	if o.s.GroupBatch > 1 {
		o.gb.firstPub[lid] = len(o.gb.firstPub)
	}
}

// obSQSHadFirst reports whether, in a GroupBatch world, SQS had b's first
// copy before a's (a break judged by the outbox half).
func (w *world) obSQSHadFirst(b, a int) bool {
	o := w.ob
	if o == nil || o.s.GroupBatch <= 1 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	pb, okb := o.gb.firstPub[b]
	pa, oka := o.gb.firstPub[a]
	return okb && (!oka || pb < pa)
}

// gbAtFake judges a request the fake answered: a size refusal followed by
// a later taken message of the same group is a violation; it notes when
// each copy reached the fake.
func (o *obHalf) gbAtFake(in *sqs.SendMessageBatchInput, out *sqs.SendMessageBatchOutput) {
	if o.s.GroupBatch <= 1 {
		return
	}
	now := time.Since(o.w.start)
	o.mu.Lock()
	byID := map[string]string{}
	for _, e := range in.Entries {
		k := aws.ToString(e.MessageDeduplicationId)
		o.gb.sends[k] = append(o.gb.sends[k], now)
		byID[aws.ToString(e.Id)] = k
	}
	for _, x := range out.Successful {
		// A deduplicated copy is answered with the sequence number of the
		// copy SQS took: a new number is a copy taken anew.
		k, n := byID[aws.ToString(x.Id)], aws.ToString(x.SequenceNumber)
		if _, had := o.gb.takenAt[k]; !had {
			o.gb.takenAt[k] = now
		}
		if n != "" && !slices.Contains(o.gb.seqs[k], n) {
			o.gb.seqs[k] = append(o.gb.seqs[k], n)
		}
	}
	o.mu.Unlock()
	for _, b := range brokenGroups(in, out, func(f types.BatchResultErrorEntry) bool {
		return strings.Contains(aws.ToString(f.Message), "shorter than")
	}) {
		o.w.violate("outbox group batch: size break: SQS refused message %s of group %s for its size (the queue's MaximumMessageSize) and took a later one, %s, in the same SendMessageBatch: the relay's runs must be cut so that a size limit refuses a suffix", b[1], b[0], b[2])
	}
}

// brokenGroups lists, for each group of a request whose answer shows an
// entry refused (one that refused selects) and a later entry of the group
// taken: group, refused dedup id, taken dedup id.
func brokenGroups(in *sqs.SendMessageBatchInput, out *sqs.SendMessageBatchOutput, refused func(types.BatchResultErrorEntry) bool) [][3]string {
	failed := map[string]types.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	ok := map[string]bool{}
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	first := map[string]string{} // group -> its first refused entry's dedup id
	var out3 [][3]string
	done := map[string]bool{}
	for _, e := range in.Entries {
		g, k := aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId)
		if f, bad := failed[aws.ToString(e.Id)]; bad && refused(f) && first[g] == "" {
			first[g] = k
		}
		if ok[aws.ToString(e.Id)] && first[g] != "" && !done[g] {
			done[g] = true
			out3 = append(out3, [3]string{g, first[g], k})
		}
	}
	return out3
}

// gbSQS is a GroupBatch relay's SQS client above the faults: it loses the
// answer to a partial batch now and then (the entries SQS took stay
// taken), and notes the breaks an answer the relay gets shows.
type gbSQS struct {
	o     *obHalf
	p     *proc
	inner outbox.SQS
}

func (c *gbSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	o := c.o
	sub := aws.ToString(in.Entries[0].MessageDeduplicationId)
	o.mu.Lock()
	o.gb.attempts[sub]++
	n := strconv.Itoa(o.gb.attempts[sub])
	o.mu.Unlock()
	// One request in eight of several entries: SQS fails one entry inside
	// (InternalError, no SenderFault) and takes the others, later ones of
	// its group included.
	call := in
	var failed []types.BatchResultErrorEntry
	if len(in.Entries) > 1 && hash64(o.w.cfg.Seed, "gb entry fails", sub, n)%8 == 0 {
		i := int(hash64(o.w.cfg.Seed, "gb entry", sub, n) % uint64(len(in.Entries)-1))
		e := in.Entries[i]
		failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("sim: an entry failed inside SQS")})
		cp := *in
		cp.Entries = slices.Delete(slices.Clone(in.Entries), i, i+1)
		call = &cp
		o.w.stat("outbox group batch: entries failed inside SQS (injected)", 1)
	}
	out, err := c.inner.SendMessageBatch(ctx, call, opt...)
	if err != nil {
		return out, err
	}
	out.Failed = append(out.Failed, failed...)
	if len(out.Failed) == 0 || len(out.Successful) == 0 {
		o.gbAnswered(out, in)
		return out, nil
	}
	if hash64(o.w.cfg.Seed, "gb lost", sub, n)%2 == 0 {
		o.w.stat("outbox group batch: answers to partial batches lost", 1)
		return nil, fmt.Errorf("operation error SendMessageBatch: request canceled, context deadline exceeded (sim: the answer to a partial batch lost)")
	}
	o.gbAnswered(out, in)
	// Content refusals pass a message (Write refuses them: none here).
	broken := brokenGroups(in, out, func(types.BatchResultErrorEntry) bool { return true })
	if len(broken) > 0 {
		o.mu.Lock()
		o.gb.answered[c.p.id] += len(broken)
		o.mu.Unlock()
	}
	return out, nil
}

// gbRound judges a live relay's round: it counted in Round.Reordered every
// break the answers it got showed.
func (o *obHalf) gbRound(p *proc, r outbox.Round) {
	if o.s.GroupBatch <= 1 {
		return
	}
	o.w.stat("outbox group batch: Round.Reordered", r.Reordered)
	o.mu.Lock()
	n := o.gb.answered[p.id]
	delete(o.gb.answered, p.id)
	o.gb.counted += r.Reordered
	o.mu.Unlock()
	if r.Reordered < n && !p.dead.Load() {
		o.w.violate("outbox group batch: break not counted: relay %s got SQS's per-entry answers showing %d group(s) broken (a message taken after an earlier one of its group was refused), and its round counted Round.Reordered %d", p.id, n, r.Reordered)
	}
}

// gbHeld judges a group held with a Reordered reason, as the operator sees
// it: a break of the group stands behind it (else a false hold).
func (o *obHalf) gbHeld(group string, seq int64, why string) {
	w := o.w
	o.mu.Lock()
	defer o.mu.Unlock()
	k := group + "|" + strconv.FormatInt(seq, 10) + "|" + why
	if o.gb.holds[k] {
		return
	}
	o.gb.holds[k] = true
	found := false
	for _, b := range o.gb.breaks {
		if b.group == group && !b.detected {
			b.detected, found = true, true
		}
	}
	if !found && o.gbOutOfOrder(group, seq) {
		// SQS had it out of order, and a hold said so before: after a
		// release the relay sees the same break again in the sequence
		// numbers (refused messages after the released one sent again
		// with the ones SQS took).
		w.stat("outbox group batch: a break held again after a release (seen anew in the sequence numbers)", 1)
		return
	}
	if _, had := o.gb.firstPub[o.byGroup[group][seq-1].lid]; !found && had && strings.Contains(why, "after refusing") {
		// Known, left to the lead: copies sent again (an earlier answer
		// lost) whose first entry fails inside SQS while the later ones
		// are answered as duplicates look like a break in the per-entry
		// answer; the group was in order at SQS.
		w.stat("outbox group batch: false hold: copies sent again, the first failed, the rest answered as duplicates (known)", 1)
		return
	}
	if !found && o.gbRetaken(group, why) {
		// Known, left to the lead: an earlier message's copy taken anew
		// (its first copy past SQS's five-minute deduplication window)
		// with a later message's copy answered as a duplicate in one
		// request: the later one's first sequence number is below the
		// earlier one's new number, which looks like a break.
		w.stat("outbox group batch: false hold: an earlier message's copy taken anew past the five-minute deduplication window, a later one's answered as a duplicate (known)", 1)
		return
	}
	if !found {
		w.violate("outbox group batch: false hold: group %s held at seq %d for %q, and SQS never had a message of it out of order (a false hold)", group, seq, why)
		return
	}
	w.stat("outbox group batch: breaks detected (group held, Reordered)", 1)
}

// retakenRE reads a Reordered hold's reason from sequence numbers (outbox
// relay.go): the held message m, the earlier one n, and the sequence
// numbers the answer gave them.
var retakenRE = regexp.MustCompile(`^` + outbox.ReorderedHold + `: SQS had message (\d+) before message (\d+) \(sequence numbers (\d+) and (\d+)\)`)

// gbRetaken reports whether a hold of group for why, "SQS had message m
// before message n (sequence numbers a and b)", read a copy of n that SQS
// took anew: b is not the sequence number of n's first copy but of a later
// one (n's first copy had left SQS's five-minute deduplication window),
// and n's first copy is below a: SQS had n first. o.mu held.
func (o *obHalf) gbRetaken(group, why string) bool {
	p := retakenRE.FindStringSubmatch(why)
	if p == nil {
		return false
	}
	n, _ := strconv.Atoi(p[2])
	ms := o.byGroup[group]
	if n < 1 || n > len(ms) {
		return false
	}
	seqs := o.gb.seqs[ms[n-1].dedupID]
	return len(seqs) > 1 && slices.Contains(seqs[1:], p[4]) && seqBefore(seqs[0], p[3])
}

// seqBefore reports whether SQS sequence number a is below b (decimal, no
// leading zeros).
func seqBefore(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// gbCheck, at the end: every break detected, unless its answer was lost
// and no relay got an answer taking a copy of the message SQS took out of
// order within five minutes of its first, after SQS took the earlier one;
// the rounds counted every Reordered hold.
func (o *obHalf) gbCheck() {
	if o.s.GroupBatch <= 1 {
		return
	}
	w := o.w
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.gb.breaks {
		if b.detected {
			continue
		}
		n := 0 // copies of the message taken out of order within five minutes, the first included
		for _, t := range o.gb.sends[b.taken.dedupID] {
			if t >= b.at && t <= b.at+5*time.Minute {
				n++
			}
		}
		if n < 2 {
			w.stat("outbox group batch: breaks not detected, no copy sent again within five minutes (excused)", 1)
			continue
		}
		ta, taken := o.gb.takenAt[b.refused.dedupID]
		if !taken || !slices.ContainsFunc(o.gb.okAt[b.taken.dedupID], func(t time.Duration) bool { return t >= ta && t < b.at+5*time.Minute }) {
			// No answer a relay got shows it: within SQS's window the
			// copies of the message taken out of order were answered
			// (if at all) before SQS took the earlier one, whose number
			// they are to be compared with; after it, SQS takes them
			// anew, with higher numbers.
			w.stat("outbox group batch: breaks not detected, no answer taking the later message within five minutes after the earlier one was taken (excused)", 1)
			continue
		}
		w.violate("outbox group batch: undetected break: group %s's message %d (seq %d) reached SQS at +%s before message %d (seq %d), and the relay never held the group for it (Reordered)",
			b.group, b.taken.lid, b.taken.gseq+1, b.at.Round(time.Millisecond), b.refused.lid, b.refused.gseq+1)
	}
	if n := len(o.gb.holds); o.gb.counted < n {
		w.violate("outbox group batch: break not counted: %d Reordered holds seen, and the relays' rounds counted Round.Reordered %d", n, o.gb.counted)
	}
}

// gbOutOfOrder reports whether SQS had group's message at seq out of
// order: not had while a later one was, or had before an earlier one. o.mu
// held.
func (o *obHalf) gbOutOfOrder(group string, seq int64) bool {
	ms := o.byGroup[group]
	if seq < 1 || int(seq) > len(ms) {
		return false
	}
	m := ms[seq-1]
	pm, had := o.gb.firstPub[m.lid]
	for _, x := range ms {
		px, xhad := o.gb.firstPub[x.lid]
		switch {
		case x.gseq > m.gseq && !had && xhad:
			return true
		case x.gseq < m.gseq && had && (!xhad && !o.dropped[x.lid] || xhad && px > pm):
			return true
		}
	}
	return false
}

// gbAfterFailed reports whether an earlier entry of f's group failed in
// the same request: the group stopped there (held, or left for the next
// round), and f's failure changes nothing the round counts.
func gbAfterFailed(in *sqs.SendMessageBatchInput, out *sqs.SendMessageBatchOutput, f types.BatchResultErrorEntry) bool {
	failed := map[string]bool{}
	for _, x := range out.Failed {
		failed[aws.ToString(x.Id)] = true
	}
	stopped := map[string]bool{}
	for _, e := range in.Entries {
		g := aws.ToString(e.MessageGroupId)
		if aws.ToString(e.Id) == aws.ToString(f.Id) {
			return stopped[g]
		}
		if failed[aws.ToString(e.Id)] {
			stopped[g] = true
		}
	}
	return false
}

// gbRefusedBroke reports whether a failed entry of a request, refused
// without SenderFault, was followed by a taken entry of its group: the
// relay holds the group (Reordered) instead of counting an error.
func gbRefusedBroke(in *sqs.SendMessageBatchInput, out *sqs.SendMessageBatchOutput, f types.BatchResultErrorEntry) bool {
	var g string
	for _, e := range in.Entries {
		if aws.ToString(e.Id) == aws.ToString(f.Id) {
			g = aws.ToString(e.MessageGroupId)
		}
	}
	for _, b := range brokenGroups(in, out, func(types.BatchResultErrorEntry) bool { return true }) {
		if b[0] == g {
			return true
		}
	}
	return false
}

// gbAnswered notes when a relay got an answer taking a copy of each
// message: one after SQS took an earlier message of its group, within the
// window that keeps the copy's first sequence number, shows a break.
func (o *obHalf) gbAnswered(out *sqs.SendMessageBatchOutput, in *sqs.SendMessageBatchInput) {
	byID := map[string]string{}
	for _, e := range in.Entries {
		byID[aws.ToString(e.Id)] = aws.ToString(e.MessageDeduplicationId)
	}
	now := time.Since(o.w.start)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range out.Successful {
		k := byID[aws.ToString(x.Id)]
		o.gb.okAt[k] = append(o.gb.okAt[k], now)
	}
}
