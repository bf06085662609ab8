package sim

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/redrive"
)

// opRedrive is a person's redrive of DLQ1 into Q1 while workers run and
// faults strike, as `worker redrive` and the console's Dead letters page
// do: of one group (the page's "Redrive this group") or of all, with a
// visibility of 2 s to the default over a link taking up to 2 s a receive
// (a DLQ too large to read within one visibility), its own process and
// faulty SQS client, and, drawn per batch, an answer to SendMessageBatch
// that names one entry neither as sent nor as failed (the entry sent or
// not: no one can tell; issue 31, hole 8).
//
// Judged when it ends, by its promise ("moves the group's messages, in
// order, to Q1"): what it reports moved was taken by SQS, and no message
// of a group was taken while an earlier one of the group it was asked to
// move (received before it, older than its cut-off) had not been. The
// world's checks judge the rest (no effect applied twice, nothing lost,
// group order at the consumers).
func (w *world) opRedrive(ctx context.Context, p *proc, rng *rand.Rand) {
	cfg := redrive.Config{DLQ: w.urls[dlq1Name], Queue: w.urls[q1Name], Before: time.Now(),
		Visibility: []time.Duration{2 * time.Second, 5 * time.Second, 30 * time.Second, 0}[rng.IntN(4)]}
	var q1 []*msgSpec
	for _, s := range w.msgs {
		if s.queue == q1Name {
			q1 = append(q1, s)
		}
	}
	if pick := rng.IntN(2 * max(len(q1), 1)); pick < len(q1) {
		cfg.Groups = []string{q1[pick].group}
	}
	latency := time.Duration(rng.IntN(3)) * time.Second
	// A run that has not ended by the scheduled redrive is cut there, as
	// a person's Ctrl-C: what it holds comes back after its visibility.
	rctx, cancel := context.WithDeadline(ctx, w.start.Add(redriveAt))
	defer cancel()
	p.kill = cancel
	sq := &opRedriveSQS{slowReceives: &slowReceives{faultySQS: &faultySQS{p: p, inner: w.sqs}, latency: latency},
		order: map[string][]string{}, taken: map[string]bool{}, eligible: map[string]bool{}, cfg: cfg}
	res, err := redrive.Run(rctx, sq, cfg)
	w.stat("world: operator redrives", 1)
	w.stat("world: operator redrives moved", res.Moved)
	if err != nil {
		w.stat("world: operator redrives that failed", 1)
	}
	if res.Moved > len(sq.taken) {
		w.violate("operator: a redrive of %s (groups %v) reported %d messages moved, and SQS took copies of %d", dlq1Name, cfg.Groups, res.Moved, len(sq.taken))
	}
	for _, g := range slices.Sorted(maps.Keys(sq.order)) {
		ids := sq.order[g]
		for i, id := range ids {
			if !sq.taken[id] || !sq.eligible[id] {
				continue
			}
			for _, prev := range ids[:i] {
				if sq.eligible[prev] && !sq.taken[prev] {
					w.violate("operator: a redrive of %s (groups %v, error %v) moved message %s of group %s and not %s, received before it (an entry SQS's answer did not name: hole 8)",
						dlq1Name, cfg.Groups, err, id, g, prev)
					return
				}
			}
		}
	}
}

// opRedriveSQS is the operator's redrive client: it records the order in
// which the DLQ gave each group's messages and which of them SQS took
// copies of, and answers some batches without naming one entry.
type opRedriveSQS struct {
	*slowReceives
	cfg      redrive.Config
	batches  int
	order    map[string][]string // group -> DLQ message ids, first receive first
	eligible map[string]bool     // ids older than the cut-off, of a group asked for
	taken    map[string]bool     // ids whose copy SQS took
	seen     map[string]bool
}

func (s *opRedriveSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := s.slowReceives.ReceiveMessage(ctx, in, opt...)
	if err != nil {
		return out, err
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if s.seen[id] {
			continue
		}
		s.seen[id] = true
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		s.order[g] = append(s.order[g], id)
		ms, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		s.eligible[id] = ms < s.cfg.Before.UnixMilli() && (len(s.cfg.Groups) == 0 || slices.Contains(s.cfg.Groups, g))
	}
	return out, nil
}

// SendMessageBatch: one batch of three with two or more entries gets an
// answer that names one of them (not the last) neither as sent nor as
// failed; half of those entries are not sent at all.
func (s *opRedriveSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.batches++
	h := hash64(s.p.w.cfg.Seed, "unnamed", s.p.id, strconv.Itoa(s.batches))
	n := len(in.Entries)
	skip, sendIt := -1, false
	call := in
	if n >= 2 && h%3 == 0 {
		skip, sendIt = int(h/3%uint64(n-1)), h/3/uint64(n-1)%2 == 0
		if !sendIt {
			c := *in
			c.Entries = slices.Delete(slices.Clone(in.Entries), skip, skip+1)
			call = &c
		}
		s.p.w.stat(fmt.Sprintf("world: operator redrive batches answered without naming an entry (sent %v)", sendIt), 1)
	}
	out, err := s.faultySQS.SendMessageBatch(ctx, call, opt...)
	if err != nil {
		return out, err
	}
	byID := map[string]string{}
	for _, e := range in.Entries {
		byID[aws.ToString(e.Id)] = aws.ToString(e.MessageDeduplicationId)
	}
	for _, ok := range out.Successful {
		d := byID[aws.ToString(ok.Id)]
		if d == "" { // a standard queue's copy: counted as one message each
			d = fmt.Sprintf("copy %d/%s", s.batches, aws.ToString(ok.Id))
		}
		s.taken[s.dlqID(d)] = true
	}
	if skip >= 0 && sendIt {
		id := aws.ToString(in.Entries[skip].Id)
		out.Successful = slices.DeleteFunc(slices.Clone(out.Successful), func(e types.SendMessageBatchResultEntry) bool { return aws.ToString(e.Id) == id })
	}
	return out, nil
}

// dlqID is the DLQ message id a redrive copy's dedup id names.
func (s *opRedriveSQS) dlqID(dedupID string) string {
	if id, ok := redrive.CopiedFrom(dedupID); ok {
		return id
	}
	return dedupID
}
