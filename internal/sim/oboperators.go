package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// Operators of the outbox (issue 31): besides the one that tends each held
// group (outboxworld.go: operate), two people act on one held group at
// once, as two console tabs or `worker outbox release` and `worker outbox
// drop` do: each reads the group's page (outbox.HeldItem), takes a
// person's while, and confirms, one a Drop of the message shown, the other
// a Release; each with its own process, faulty DynamoDB client (errors
// before the call takes effect, lost answers, pauses, crashes) and a link
// whose answers take a while (a window between Drop's read and its
// transaction). And at every look a person reads the pending listing
// (outbox.ListPending, with a page as short as the console's first rows).
//
// Judged when each acts: a Drop that reports success has dropped a message
// SQS had not taken when the operator read the hold, nor took since (hadIt:
// a Reordered hold's message SQS may have had already); a held group (held before the listing and after it, at
// the same message) is listed, shown held. At the end (obCheck): a message
// the table marks dropped was never taken by SQS, every other one was, in
// its group's order (published1).

// obRace runs the two operators on group's hold (h, at message s) and
// waits for both. A drop that may have taken effect (its answer lost) is
// judged at the end by the table.
func (o *obHalf) obRace(ctx context.Context, q, group string, s *msgSpec, h outbox.Held) {
	w := o.w
	r := func(part string, n uint64) time.Duration {
		return time.Duration(hash64(w.cfg.Seed, "obrace", group, strconv.FormatInt(h.Seq, 10), part)%n) * time.Second
	}
	w.stat("outbox: operators racing on a held group", 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		p := w.newProc(fmt.Sprintf("oboperator.%s.%d.drop", group, h.Seq))
		db := &slowGets{API: &cDynamo{p: p, inner: w.db}, latency: r("drop link", 20)}
		it, _, held, err := outbox.HeldItem(ctx, db, obTable, w.urls[q], group)
		if err != nil || !held || it.Seq != h.Seq {
			return
		}
		w.obTrace(s.lid, "%s read the hold (%d %q)", p.id, h.Seq, h.Why)
		o.readHold(s)
		time.Sleep(r("drop think", 10))
		err = outbox.Drop(ctx, db, obTable, w.urls[q], group, it.ID)
		w.obTrace(s.lid, "%s: Drop answered %v", p.id, err)
		o.mu.Lock()
		defer o.mu.Unlock()
		switch {
		case err == nil:
			o.dropped[s.lid] = true
			w.stat("outbox: racing operator dropped a held message", 1)
			if why := o.droppedFor(s); o.published[s.lid] && !o.hadIt(s, why) {
				w.violate("outbox: operator: Drop of message %d (%s, group %s, seq %d) reported it dropped, never to be published, and SQS had taken it (hole 3); held for %q", s.lid, it.ID, group, h.Seq, why)
			}
		case errors.Is(err, outbox.ErrNotHeld):
			w.stat("outbox: racing operator's drop refused (not held as read)", 1)
		default:
			o.maybeDropped[s.lid] = true // its answer may be lost: the table says (obCheck)
		}
	})
	wg.Go(func() {
		p := w.newProc(fmt.Sprintf("oboperator.%s.%d.release", group, h.Seq))
		db := &slowGets{API: &cDynamo{p: p, inner: w.db}, latency: r("release link", 4)}
		it, _, held, err := outbox.HeldItem(ctx, db, obTable, w.urls[q], group)
		if err != nil || !held {
			return
		}
		time.Sleep(r("release think", 10))
		err = outbox.Release(ctx, db, obTable, w.urls[q], group, it.ID)
		w.obTrace(s.lid, "%s: Release answered %v", p.id, err)
		switch {
		case err == nil:
			w.stat("outbox: racing operator released a held group", 1)
		case errors.Is(err, outbox.ErrNotHeld):
			w.stat("outbox: racing operator's release refused (not held as read)", 1)
		}
	})
	wg.Wait()
}

// obListing reads the pending listing as the console's overview does, with
// a short page (1 to 3 rows), and judges it against the table: a group
// held before and after the listing at the same message is listed held.
// Only operators release a group, and none acts while this one reads.
func (o *obHalf) obListing(ctx context.Context, look int) {
	w := o.w
	before := o.heldNow(ctx)
	if len(before) == 0 {
		return
	}
	p := w.newProc(fmt.Sprintf("oboperator.list.%d", look))
	limit := 1 + int(hash64(w.cfg.Seed, "oblist", strconv.Itoa(look))%3)
	items, err := outbox.ListPending(ctx, &cDynamo{p: p, inner: w.db}, obTable, limit)
	if err != nil {
		return
	}
	after := o.heldNow(ctx)
	w.stat("outbox: operator read the pending listing", 1)
	for _, g := range slices.Sorted(maps.Keys(before)) {
		if after[g] != before[g] {
			continue
		}
		shown := false
		for _, it := range items {
			shown = shown || it.Group == g && it.Seq == before[g] && it.Held != ""
		}
		if !shown {
			w.violate("outbox: operator: ListPending (limit %d) did not list group %s, held at seq %d before and after it (hole 4); it listed %d messages", limit, g, before[g], len(items))
		}
	}
}

// heldNow is every held group and the message it is held at, as the table
// says now.
func (o *obHalf) heldNow(ctx context.Context) map[string]int64 {
	held := map[string]int64{}
	for _, g := range slices.Sorted(maps.Keys(o.byGroup)) {
		if h, ok, err := outbox.GroupHeld(ctx, o.w.db, obTable, o.w.urls[o.byGroup[g][0].queue], g); err == nil && ok {
			held[g] = h.Seq
		}
	}
	return held
}

// readHold notes, as an operator reads s's hold, whether SQS has a copy of
// it already (o.mu not held).
func (o *obHalf) readHold(s *msgSpec) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.published[s.lid] {
		o.hadAtRead[s.lid] = true
	}
}

// hadIt: a message marked dropped that SQS has is excused when SQS had it
// already when an operator read the hold: the relay holds a group at the
// first message SQS had out of order (a Reordered hold), or at a refused
// one an earlier relay's copy, its answer or progress lost, reached SQS
// before the refusal (a size hold after the queue's limit was lowered).
// Drop's promise is about what the relay publishes after the hold
// (docs/DESIGN.md, "The outbox: what remains"). A copy SQS took after the
// read is never excused (hole 3). o.mu held.
func (o *obHalf) hadIt(s *msgSpec, _ string) bool {
	return o.hadAtRead[s.lid]
}

// tableDropped reports whether the table marks s dropped.
func (o *obHalf) tableDropped(s *msgSpec) bool { return o.droppedFor(s) != "" }

// droppedFor is why s had been held, when the table marks it dropped.
func (o *obHalf) droppedFor(s *msgSpec) string {
	out, err := o.w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(obTable), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{
			outboxschema.AttrPK: &ddbtypes.AttributeValueMemberS{Value: o.w.urls[s.queue] + "#" + s.group},
			outboxschema.AttrSK: &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(s.gseq + 1)},
		}})
	if err != nil {
		return ""
	}
	return dedup.GetS(out.Item, outboxschema.AttrDropped)
}

// slowGets is an operator's link: every GetItem answer takes latency.
type slowGets struct {
	outbox.API
	latency time.Duration
}

func (s *slowGets) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := s.API.GetItem(ctx, in, opt...)
	time.Sleep(s.latency)
	return out, err
}

func (w *world) obTrace(lid int, format string, args ...any) {
	w.mu.Lock()
	w.tr(lid, format, args...)
	w.mu.Unlock()
}
