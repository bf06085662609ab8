package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// The outbox half of the swarm's world (issue 19: the outbox was taken
// only in the chain's fixed world). In the seeds that draw it, a producer
// commits business items and outbox messages in one outbox.Write each, and
// relays (outbox.Relay, as `worker relay` runs it) publish them to the
// world's own Q1 and Q2 under the world's faults (crash, freeze, pause,
// lost answers, partial batches, TransactionConflict, slow answers), where
// the world's pool workers and Lambda environments consume them as they do
// the rest of the workload: each outbox message is a logical message of
// the workload (a msgSpec whose sends are the relays'), so every invariant
// of the consumer half holds for it too (applied exactly once, in its
// group's order, nothing lost). Sizes are drawn up to SQS's limit (with
// the relay's idempotency-key counted), exactly at it, one byte under and
// one byte over; an operator may lower Q2's MaximumMessageSize mid-run,
// and releases or drops the groups the relay holds.
//
// Invariants, judged where they happen, each naming its cause:
//   - a group's messages reach SQS (first copies) in write order: a
//     message is published only after every earlier one of its group was,
//     or was dropped by the operator ("outbox order");
//   - nothing is published whose business write did not commit, nor after
//     the operator dropped it;
//   - Write refuses a message one byte over SQS's limit (ErrInvalid);
//   - SQS's refusal of a message for its size holds the group: the relay
//     never marks a message Write took as failed, a held group's held
//     message is the one over the queue's lowered limit, and it shows as
//     held (outbox.HeldItem, outbox.ListPending);
//   - a relay round whose SendMessageBatch failed counts an error
//     (Round.Errors), and a batch SQS refused as too long is sent again in
//     parts, or counted (hole 1);
//   - at the end nothing is pending, every message Write took is marked
//     published (or dropped by the operator), none failed or held.
const (
	obTable    = "sim-outbox"
	obBusiness = "sim-business"
	obLidBase  = 1000 // outbox messages' logical ids: 1001, ...
	obLowered  = q2Name
)

// obShape is the outbox half's share of a seed's shape.
type obShape struct {
	On          bool
	Groups      int           // groups, each on Q1 or Q2
	Msgs        int           // messages written per group (over-limit ones among them)
	Relays      int           // relays at once
	PerGroup    int           // Relay.PerGroup
	Concurrency int           // Relay.Concurrency
	Sizes       string        // small, big (up to SQS's limit), limits (at, under and over each limit)
	Multi       bool          // writes of up to three messages in one transaction
	Lower       bool          // an operator lowers Q2's MaximumMessageSize mid-run, raises it later
	TooLong     bool          // SQS refuses a multi-entry batch as too long now and then
	OneQueue    bool          // every group on one queue (Q2): 12 of them, past a batch's 10 entries
	Pages       bool          // 110 messages pending at once: past BatchGetItem's 100 keys (limits.go)
	PagesBig    bool          // and 80 of them near 256 KiB: past its 16 MB answer
	Poll        time.Duration // Relay.Poll
	GroupBatch  int           // Relay.GroupBatch, hot groups (groupbatch.go); 0: the default
	Combine     bool          // concurrent Writes of a group, combined (obcombine.go)
}

func drawOutbox(pick func(name string, n int) int) obShape {
	if pick("ob on", 3) != 0 { // one seed in three: it costs CPU
		return obShape{}
	}
	o := obShape{
		On: true, Groups: 1 + pick("ob groups", 4), Msgs: 3 + pick("ob msgs", 4), Relays: []int{1, 2, 2, 3}[pick("ob relays", 4)],
		PerGroup: []int{1, 3, 10}[pick("ob pergroup", 3)], Concurrency: []int{1, 4, 32}[pick("ob conc", 3)],
		Sizes: []string{"small", "small", "big", "limits"}[pick("ob sizes", 4)], Multi: pick("ob multi", 2) == 0,
		Lower: pick("ob lower", 3) == 0, TooLong: pick("ob toolong", 3) == 0,
		Poll: []time.Duration{time.Second, 3 * time.Second}[pick("ob poll", 2)],
	}
	if pick("ob many", 5) == 0 {
		// More groups of one queue than a batch takes (10 entries).
		o.Groups, o.Msgs, o.OneQueue = 12, 3, true
	}
	if pick("ob pages", 10) == 0 {
		o = o.pages(pick("ob pages big", 4) == 0)
	}
	return o.drawGroupBatch(pick).drawCombine(pick)
}

func (o obShape) choices() []string {
	if !o.On {
		return []string{"outbox=off"}
	}
	return append([]string{"outbox=on", fmt.Sprintf("outbox groups=%d", o.Groups), fmt.Sprintf("outbox relays=%d", o.Relays), fmt.Sprintf("outbox poll=%s", o.Poll), fmt.Sprintf("outbox per group=%d", o.PerGroup),
		"outbox sizes=" + o.Sizes, fmt.Sprintf("outbox multi-message writes=%v", o.Multi),
		fmt.Sprintf("outbox limit lowered=%v", o.Lower), fmt.Sprintf("outbox batches refused as too long=%v", o.TooLong), fmt.Sprintf("outbox read pages=%v", o.Pages), fmt.Sprintf("outbox read pages of 16 MB=%v", o.PagesBig), fmt.Sprintf("outbox combined writes=%v", o.Combine)}, o.gbChoices()...)
}

// obWrite is one planned outbox.Write: its messages, in order.
type obWrite struct {
	at   time.Duration
	msgs []*msgSpec // accepted by Write
	over *obOver    // a message one byte over SQS's limit, written alone: Write must refuse it
}

type obOver struct {
	queue, group, id, body string
	attrs                  map[string]string
	why                    string // the limit it passes (sqslimits.go); "": SQS's size
}

// relayRound is what a relay process's current round met at SQS.
type relayRound struct {
	errs    int             // SendMessageBatch calls or entries that failed retryably
	refused map[string]bool // dedup ids of a multi-entry batch refused as too long, not sent again yet
}

// obHalf is the outbox half of a world.
type obHalf struct {
	w        *world
	s        obShape
	lowerTo  int // Q2's MaximumMessageSize while lowered (0: never lowered)
	lowerAt  time.Duration
	raiseAt  time.Duration
	writes   []*obWrite
	byKey    map[string]*msgSpec // relay's key (dedup id) -> message
	byGroup  map[string][]*msgSpec
	writeOf  map[int]string // lid -> its business item
	reads    atomic.Int64
	produced atomic.Bool
	raised   atomic.Bool

	mu        sync.Mutex
	published map[int]bool
	dropped   map[int]bool // the operator's Drop answered success (or is about to be called: tend)
	// maybeDropped: a racing operator's Drop whose answer was an error,
	// which may have taken effect (its answer lost): the table says.
	maybeDropped map[int]bool
	hadAtRead    map[int]bool // SQS had a copy when an operator read its hold (oboperators.go)
	rounds       map[string]*relayRound
	tooLong      map[string]int // attempts per batch (its first dedup id and size)
	gb           *gbState       // GroupBatch's breaks (groupbatch.go)

	edges bool                      // at SQS's limits on attributes, ids and groups (sqslimits.go)
	ids   map[int]string            // lid -> the ID it was written with, in an edges world
	attrs map[int]map[string]string // lid -> its caller's attributes

	committed map[int]int64   // lid -> its outbox sequence number, once committed (obcombine.go)
	badWrite  map[string]bool // Writes judged not consecutive (obcombine.go)
}

func (p *proc) seed() uint64            { return p.w.cfg.Seed }
func (p *proc) nextRead() int64         { return p.w.ob.reads.Add(1) }
func (p *proc) stat(name string, n int) { p.w.stat(name, n) }
func (p *proc) unreadKeys() *unreadKeys { return &p.unread }
func (p *proc) violate(format string, args ...any) {
	p.w.violate(format, args...)
}

// obSize is what SQS counts of a message as the relay sends it.
func obSize(group, id, body string) int {
	return len(body) + len(outbox.IdempotencyKeyAttribute) + len("String") + len(outbox.Key(group, id))
}

// obBody is an outbox message's body, padded so that SQS counts size bytes
// of it (no padding when size is 0).
func obBody(acct string, lid int, group, id string, size int) string {
	head := fmt.Sprintf(`{"account":%q,"amount_cents":%d`, acct, lid)
	if size == 0 {
		return head + "}"
	}
	head += `,"pad":"`
	pad := size - obSize(group, id, head+`"}`)
	return head + strings.Repeat("x", max(pad, 0)) + `"}`
}

// obWorkload plans the outbox half: its messages join the workload (after
// the direct ones, whose sizes the lowered limit stays above).
func (w *world) obWorkload() {
	o := &obHalf{w: w, s: w.shape.Outbox, byKey: map[string]*msgSpec{}, byGroup: map[string][]*msgSpec{}, writeOf: map[int]string{},
		published: map[int]bool{}, dropped: map[int]bool{}, maybeDropped: map[int]bool{}, hadAtRead: map[int]bool{}, rounds: map[string]*relayRound{}, tooLong: map[string]int{}, gb: newGB(), ids: map[int]string{}, attrs: map[int]map[string]string{}}
	w.ob = o
	if !o.s.On {
		return
	}
	o.edges = !o.s.Pages && obEdgesWorld(w.cfg.Seed)
	r := func(parts ...string) uint64 { return hash64(w.cfg.Seed, append([]string{"outbox"}, parts...)...) }
	if o.s.Lower {
		direct := 0
		for _, s := range w.msgs {
			if s.queue == obLowered {
				direct = max(direct, len(s.body)+len(dedup.IdempotencyKeyAttribute)+len("String")+len(s.keyAttr))
			}
		}
		lo := max(direct+4096, 4096)
		o.lowerTo = lo + int(r("lower")%uint64(outbox.MaxBodyBytes-4096-lo))
		o.lowerAt = 30*time.Second + time.Duration(r("lower at")%240)*time.Second
		o.raiseAt = o.lowerAt + 2*time.Minute + time.Duration(r("raise at")%240)*time.Second
	}
	lid := obLidBase
	type planned struct {
		at   time.Duration
		s    *msgSpec
		over *obOver
	}
	var plan []planned
	for g := range o.s.Groups {
		group := o.obGroupName(g)
		q := q1Name
		if r("queue", group)%2 == 0 || (g == 0 && o.s.Lower) || o.s.OneQueue {
			q = q2Name
		}
		t := time.Duration(r("start", group)%30) * time.Second
		gseq := 0
		for range o.s.Msgs {
			lid++
			id := fmt.Sprintf("ob-%d", lid)
			x := r("size", strconv.Itoa(lid))
			size := 0
			over := false
			switch o.s.Sizes {
			case "big":
				if x%2 == 0 {
					size = 64*1024 + int(x>>8)%(outbox.MaxBodyBytes-64*1024+1)
				}
			case "limits":
				sizes := []int{0, outbox.MaxBodyBytes, outbox.MaxBodyBytes - 1, outbox.MaxBodyBytes + 1}
				if o.lowerTo > 0 && q == obLowered {
					sizes = append(sizes, o.lowerTo, o.lowerTo-1, o.lowerTo+1)
				}
				size = sizes[int(x>>8)%len(sizes)]
				over = size > outbox.MaxBodyBytes
			case "pages":
				size = o.s.pageSize(g, x)
			}
			if o.lowerTo > 0 && q == obLowered && size == 0 && x%3 == 0 {
				// Around the lowered limit: held while it lasts.
				size = []int{o.lowerTo - 1, o.lowerTo, o.lowerTo + 1, o.lowerTo + 1, outbox.MaxBodyBytes}[int(x>>16)%5]
			}
			switch {
			case o.s.Pages:
				t = pagesAt // all pending at once (limits.go)
			case o.s.OneQueue:
				// The groups' messages at the same times: a sweep finds
				// more groups than a batch takes.
				t = time.Duration(1+gseq) * 40 * time.Second
			default:
				t += o.s.obGap(r, lid)
			}
			if size == 0 && !over {
				id, o.attrs[lid] = o.obEdgeMsg(lid, id)
			}
			o.ids[lid] = id
			if r := o.obEdgeRefusal(q, group, lid); r != nil {
				plan = append(plan, planned{at: t, over: r})
			}
			acct := q[:2] + "-" + group
			body := obBody(acct, lid, group, id, size)
			if over {
				plan = append(plan, planned{at: t, over: &obOver{queue: q, group: group, id: id, body: body}})
				continue
			}
			key := outbox.Key(group, id)
			s := &msgSpec{lid: lid, queue: q, group: group, gseq: gseq, keyAttr: key, dedupID: key, body: body,
				key: dedup.Scope{Namespace: namespace, Queue: q, PerGroup: w.perGroup(q)}.Key(group, key)}
			gseq++
			w.msgs = append(w.msgs, s)
			w.byLid[lid] = s
			w.byKey[s.key] = s
			o.byKey[key] = s
			o.byGroup[group] = append(o.byGroup[group], s)
			plan = append(plan, planned{at: t, s: s})
		}
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].at < plan[j].at })
	for i := 0; i < len(plan); {
		p := plan[i]
		if p.over != nil {
			o.writes = append(o.writes, &obWrite{at: p.at, over: p.over})
			i++
			continue
		}
		wr := &obWrite{at: p.at}
		n := 1
		if o.s.Multi {
			n = 1 + int(r("multi", strconv.Itoa(p.s.lid))%3)
		}
		if o.s.Pages {
			n = o.s.Msgs // a group's messages in one write (limits.go)
		}
		for ; i < len(plan) && len(wr.msgs) < n && plan[i].over == nil; i++ {
			wr.msgs = append(wr.msgs, plan[i].s)
			o.writeOf[plan[i].s.lid] = fmt.Sprintf("biz#%d", p.s.lid)
		}
		o.writes = append(o.writes, wr)
	}
}

// obStart sets the outbox half up and starts its producer, relays and
// operator.
func (w *world) obStart(ctx context.Context) error {
	o := w.ob
	if !o.s.On {
		return nil
	}
	if _, err := w.db.CreateTable(ctx, outboxschema.CreateTableInput(obTable)); err != nil {
		return err
	}
	if _, err := w.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(obBusiness), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}); err != nil {
		return err
	}
	w.obLoop(ctx, "obproducer", o.produce)
	// The relays stop once everything is written and published (the
	// operator sees it): their idle sweeps would cost the rest of the
	// run's CPU for nothing.
	rctx, stop := context.WithCancel(ctx)
	for slot := range o.s.Relays {
		w.obLoop(rctx, fmt.Sprintf("obrelay%d", slot), o.relay)
	}
	w.wg.Go(func() { o.operate(ctx, stop) })
	return nil
}

// obLoop runs incarnations of one process slot: when one dies, the next
// starts 5 to 25 s later with nothing of the old one's state.
func (w *world) obLoop(ctx context.Context, slot string, run func(ctx context.Context, p *proc)) {
	w.wg.Go(func() {
		for inc := 0; ctx.Err() == nil; inc++ {
			p := w.newProc(fmt.Sprintf("%s.%d", slot, inc))
			pctx, cancel := context.WithCancel(ctx)
			p.kill = cancel
			run(pctx, p)
			cancel()
			if ctx.Err() != nil || !p.dead.Load() {
				return
			}
			t := time.NewTimer(5*time.Second + time.Duration(hash64(w.cfg.Seed, "restart", p.id)%uint64(20*time.Second)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
				return
			}
		}
	})
}

// produce makes the planned writes at their times, each until it is known
// committed (committed now, or found committed by an earlier attempt: the
// business item's condition). An incarnation starts from the first write
// again: it knows nothing.
func (o *obHalf) produce(ctx context.Context, p *proc) {
	w := o.w
	ob := outbox.New(o.producerDB(p), obTable, outbox.WithRand(seededRand(w.cfg.Seed, p.id)))
	if !o.produceAll(ctx, p, func(wr *obWrite) bool { return o.write(ctx, p, ob, wr) }) {
		return
	}
	o.produced.Store(true)
	<-ctx.Done()
}

// write makes one planned write until it is known committed, or refused
// as it must be; false when the process died first (or Write refused a
// message it must take).
func (o *obHalf) write(ctx context.Context, p *proc, ob *outbox.Outbox, wr *obWrite) bool {
	w := o.w
	if wr.over != nil {
		for ctx.Err() == nil && !p.dead.Load() {
			err := ob.Write(ctx, []outbox.Message{{QueueURL: w.urls[wr.over.queue], Group: wr.over.group, ID: wr.over.id, Body: wr.over.body, Attributes: wr.over.attrs}})
			why := "past SQS's limits: " + wr.over.why
			if wr.over.why == "" {
				why = fmt.Sprintf("%d bytes with the relay's idempotency-key: one byte over SQS's limit", obSize(wr.over.group, wr.over.id, wr.over.body))
			}
			if errors.Is(err, outbox.ErrInvalid) {
				w.stat("outbox: writes refused "+cmp.Or(wr.over.why, "one byte over SQS's limit"), 1)
				break
			}
			if err == nil {
				w.violate("outbox: Write took message %q of group %q, %s", wr.over.id, wr.over.group, why)
				break
			}
		}
		return ctx.Err() == nil && !p.dead.Load()
	}
	var msgs []outbox.Message
	for _, s := range wr.msgs {
		msgs = append(msgs, outbox.Message{QueueURL: w.urls[s.queue], Group: s.group, ID: o.obIDOf(s), Body: s.body, Attributes: o.attrs[s.lid]})
	}
	business := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
		TableName: aws.String(obBusiness), Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: o.writeOf[wr.msgs[0].lid]}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || p.dead.Load() {
			return false
		}
		err := ob.Write(ctx, msgs, business)
		var tce *ddbtypes.TransactionCanceledException
		if err == nil {
			w.stat("outbox: writes committed", 1)
			return true
		}
		if errors.Is(err, outbox.ErrInvalid) {
			w.violate("outbox: Write refused message %d (at most SQS's limit with the relay's key): %v", wr.msgs[0].lid, err)
			return false
		}
		if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return true // committed by an earlier attempt
		}
		w.stat("outbox: writes retried", 1)
		time.Sleep(time.Second << min(attempt, 4))
	}
}

// relay runs a relay incarnation as `worker relay` does (Run).
func (o *obHalf) relay(ctx context.Context, p *proc) {
	w := o.w
	if !o.pagesWritten(ctx) {
		return
	}
	var sqsc outbox.SQS = &faultySQS{p: p, inner: &obSQS{Server: w.sqs, o: o}}
	if o.s.GroupBatch > 1 {
		sqsc = &gbSQS{o: o, p: p, inner: sqsc}
	}
	r := &outbox.Relay{DB: &cDynamo{p: p, inner: w.db}, SQS: &relaySQS{o: o, p: p, inner: sqsc},
		Table: obTable, PerGroup: o.s.PerGroup, GroupBatch: o.s.GroupBatch, Concurrency: o.s.Concurrency, Poll: o.s.Poll, Logger: w.log(p), Rand: seededRand(w.cfg.Seed, p.id),
		OnRound: func(r outbox.Round) { o.round(p, r) }}
	_ = r.Run(ctx)
}

// round judges a relay round by what its process met at SQS.
func (o *obHalf) round(p *proc, r outbox.Round) {
	o.w.stat("outbox: relay rounds", 1)
	o.w.stat("outbox: relay published", r.Published)
	o.w.stat("outbox: relay errors (Round.Errors)", r.Errors)
	o.w.stat("outbox: relay duplicates known", r.Duplicates)
	o.mu.Lock()
	rr := o.rounds[p.id]
	delete(o.rounds, p.id)
	o.mu.Unlock()
	o.gbRound(p, r)
	if p.dead.Load() {
		return
	}
	if r.Failed > 0 {
		o.w.violate("outbox: relay %s marked %d messages failed that Write took (SQS refused them for a reason their producer could not know: the group must be held)", p.id, r.Failed)
	}
	if rr == nil {
		return
	}
	if rr.errs > 0 && r.Errors == 0 {
		o.w.violate("outbox: relay %s: SendMessageBatch failed %d times in a round that counted no error (Round.Errors 0; hole 1)", p.id, rr.errs)
	}
	if len(rr.refused) > 0 && r.Errors == 0 && r.Held == 0 {
		var ids []string
		for id := range rr.refused {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		o.w.violate("outbox: relay %s: a batch SQS refused as too long (BatchRequestTooLong) was neither sent again in parts nor counted: %v (hole 1)", p.id, ids)
	}
}

// relaySQS is a relay's SQS client above the faults: it sees what the
// relay sees.
type relaySQS struct {
	o     *obHalf
	p     *proc
	inner outbox.SQS
}

func (c *relaySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := c.inner.SendMessageBatch(ctx, in, opt...)
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	rr := c.o.rounds[c.p.id]
	if rr == nil {
		rr = &relayRound{refused: map[string]bool{}}
		c.o.rounds[c.p.id] = rr
	}
	switch {
	case err != nil && awserr.Code(err) == "BatchRequestTooLong":
		if len(in.Entries) > 1 {
			for _, e := range in.Entries {
				rr.refused[aws.ToString(e.MessageDeduplicationId)] = true
			}
		}
	case err != nil:
		rr.errs++
	default:
		for _, e := range in.Entries {
			delete(rr.refused, aws.ToString(e.MessageDeduplicationId))
		}
		for _, f := range out.Failed {
			if !f.SenderFault && !gbRefusedBroke(in, out, f) && !gbAfterFailed(in, out, f) {
				rr.errs++
			}
		}
	}
	return out, err
}

// obSQS is the relays' SQS at the fake, below the faults: it sees what
// SQS took, and refuses a multi-entry batch as too long now and then in
// the shapes that draw it (SQS counting more than the relay did).
type obSQS struct {
	*memsqs.Server
	o *obHalf
}

func (c *obSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	o := c.o
	if o.s.TooLong && len(in.Entries) > 1 {
		sub := aws.ToString(in.Entries[0].MessageDeduplicationId) + "|" + strconv.Itoa(len(in.Entries))
		o.mu.Lock()
		o.tooLong[sub]++
		n := o.tooLong[sub]
		o.mu.Unlock()
		if hash64(o.w.cfg.Seed, "toolong", sub, strconv.Itoa(n))%3 == 0 {
			o.w.stat("outbox: batches refused as too long (injected)", 1)
			return nil, &types.BatchRequestTooLong{Message: aws.String("sim: Batch requests cannot be longer than 1048576 bytes.")}
		}
	}
	total := 0
	for _, e := range in.Entries {
		total += len(aws.ToString(e.MessageBody))
		for k, v := range e.MessageAttributes {
			total += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
		}
	}
	switch {
	case total == 1<<20:
		o.w.stat("outbox: batches of exactly 1 MiB", 1)
	case total > 1<<20-256*1024:
		o.w.stat("outbox: batches over 768 KiB", 1)
	}
	if len(in.Entries) == 10 {
		o.w.stat("outbox: batches of 10 entries", 1)
	}
	out, err := c.Server.SendMessageBatch(ctx, in, opt...)
	if err != nil {
		if awserr.Code(err) == "BatchRequestTooLong" {
			o.w.stat("outbox: batches refused as too long (by the fake)", 1)
		}
		return out, err
	}
	o.gbAtFake(in, out)
	byID := map[string]types.SendMessageBatchRequestEntry{}
	for _, e := range in.Entries {
		byID[aws.ToString(e.Id)] = e
	}
	for _, s := range out.Successful {
		o.published1(sqsmsg.QueueName(aws.ToString(in.QueueUrl)), byID[aws.ToString(s.Id)])
	}
	for _, f := range out.Failed {
		if strings.Contains(aws.ToString(f.Message), "shorter than") {
			o.w.stat("outbox: entries refused for their size", 1)
		}
	}
	return out, err
}

// published1 judges a copy SQS took: its business write committed, the
// operator did not drop it, and (a first copy) every earlier message of
// its group was published first or dropped.
func (o *obHalf) published1(q string, e types.SendMessageBatchRequestEntry) {
	w := o.w
	key := aws.ToString(e.MessageDeduplicationId)
	s := o.byKey[key]
	if s == nil {
		w.violate("outbox: %s published to %s, which no Write took", key, q)
		return
	}
	biz, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(obBusiness),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: o.writeOf[s.lid]}}, ConsistentRead: aws.Bool(true)})
	if err != nil || biz.Item == nil {
		w.violate("outbox: message %d (%s) published, and its business write %s has not committed", s.lid, key, o.writeOf[s.lid])
	}
	if q != s.queue || aws.ToString(e.MessageGroupId) != s.group || aws.ToString(e.MessageBody) != s.body {
		w.violate("outbox: message %d published to %s group %s with another body or place than written (%s group %s)", s.lid, q, aws.ToString(e.MessageGroupId), s.queue, s.group)
	}
	var bad []string
	o.mu.Lock()
	if o.dropped[s.lid] {
		bad = append(bad, fmt.Sprintf("outbox: message %d (%s) published after the operator dropped it", s.lid, key))
	}
	first := !o.published[s.lid]
	if first {
		bad = append(bad, o.obCommitOrder(context.Background(), s.group)...)
		for _, prev := range o.byGroup[s.group][:s.gseq] {
			if !o.published[prev.lid] && !o.dropped[prev.lid] && !o.tableDropped(prev) { // a racing Drop commits before it answers
				if o.s.GroupBatch > 1 {
					o.gbBroke(prev, s) // judged when held, or at the end (groupbatch.go)
					break
				}
				bad = append(bad, fmt.Sprintf("outbox order: group %s's message %d (seq %d) published before message %d (seq %d), which was neither published nor dropped", s.group, s.lid, s.gseq+1, prev.lid, prev.gseq+1))
			}
		}
		o.published[s.lid] = true
		o.gbFirst(s.lid)
	}
	o.mu.Unlock()
	for _, b := range bad {
		w.violate("%s", b)
	}
	w.mu.Lock()
	w.tr(s.lid, "SQS took a copy from the outbox (first: %v)", first)
	w.mu.Unlock()
	if first {
		w.stat("outbox: first copies published", 1)
	} else {
		w.stat("outbox: copies published again", 1)
	}
}

// operate is the operator: it lowers Q2's MaximumMessageSize (in the shapes
// that draw it) and raises it again later; every 20 s it looks at each
// group, and a held one must be held at a message over the limit the queue
// had, shown as held; it drops the held message (a third of the time,
// drawn) or releases the group once the limit is raised again.
func (o *obHalf) operate(ctx context.Context, stopRelays func()) {
	defer stopRelays()
	w := o.w
	setMax := func(n int) {
		if _, err := w.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(w.urls[obLowered]),
			Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(n)}}); err != nil && ctx.Err() == nil {
			w.violate("outbox: operator: set MaximumMessageSize of %s to %d: %v", obLowered, n, err)
		}
	}
	lowered := false
	for look := 0; ctx.Err() == nil; look++ {
		w.seq.step("operator", "look", "") // its looks fall on whole seconds, as the producer's sends do
		now := time.Since(w.start)
		switch {
		case o.lowerTo > 0 && !lowered && now >= o.lowerAt:
			setMax(o.lowerTo)
			lowered = true
			w.stat("outbox: operator lowered the queue's MaximumMessageSize", 1)
		case o.lowerTo > 0 && lowered && !o.raised.Load() && now >= o.raiseAt:
			setMax(outbox.MaxBodyBytes)
			o.raised.Store(true)
		case o.lowerTo == 0:
			o.raised.Store(true)
		}
		o.obListing(ctx, look)
		for g := range o.s.Groups {
			o.tend(ctx, o.obGroupName(g))
		}
		if o.w.obSettled(ctx) {
			stopRelays()
		}
		t := time.NewTimer(20 * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
			return
		}
	}
}

// tend looks at one group as `worker outbox` shows it and decides.
func (o *obHalf) tend(ctx context.Context, group string) {
	w := o.w
	var q string
	if ms := o.byGroup[group]; len(ms) > 0 {
		q = ms[0].queue
	} else {
		return
	}
	it, h, held, err := outbox.HeldItem(ctx, w.db, obTable, w.urls[q], group)
	if err != nil || !held {
		return
	}
	// The held message by its key: its seq is its place in the order the
	// Writes committed, which a combining seed's are not planned in.
	s := o.byKey[outbox.Key(group, it.ID)]
	if h.Seq < 1 || s == nil || s.group != group {
		w.violate("outbox: group %s held at seq %d (message %q), which no Write gave it", group, h.Seq, it.ID)
		return
	}
	limit := outbox.MaxBodyBytes
	if q == obLowered && o.lowerTo > 0 {
		limit = o.lowerTo
	}
	size := obSize(group, o.obIDOf(s), s.body)
	reordered := strings.HasPrefix(h.Why, outbox.ReorderedHold)
	if reordered {
		o.gbHeld(group, h.Seq, h.Why)
	}
	switch {
	case !reordered && size <= limit:
		w.violate("outbox: group %s held at message %d (%d bytes), which fits every limit %s had (%d): %s", group, s.lid, size, q, limit, h.Why)
	case !reordered && !strings.Contains(h.Why, "InvalidParameterValue") && !strings.Contains(h.Why, "BatchRequestTooLong"):
		w.violate("outbox: group %s held at message %d for %q, not its size", group, s.lid, h.Why)
	case it.Held == "" || !it.SentAt.IsZero() || it.Seq != h.Seq:
		w.violate("outbox: group %s held at seq %d, and its message does not show it (held %q, sent %v, seq %d)", group, h.Seq, it.Held, !it.SentAt.IsZero(), it.Seq)
	}
	pending, err := outbox.ListPending(ctx, w.db, obTable, 1000)
	shown := false
	for _, p := range pending {
		shown = shown || p.Group == group && p.Seq == h.Seq && p.Held != ""
	}
	if err == nil && !shown {
		w.violate("outbox: group %s held at seq %d, and outbox.ListPending does not show it held", group, h.Seq)
	}
	w.stat("outbox: operator found a group held", 1)
	if hash64(w.cfg.Seed, "obrace", group, strconv.FormatInt(h.Seq, 10))%2 == 0 {
		if o.raised.Load() || reordered { // as a release is meant: once the cause is gone
			o.obRace(ctx, q, group, s, h)
		}
		return
	}
	if hash64(w.cfg.Seed, "drop", group, strconv.FormatInt(h.Seq, 10))%3 == 0 {
		o.readHold(s)
		o.mu.Lock()
		o.dropped[s.lid] = true // before: a relay may not publish it from now on
		o.mu.Unlock()
		if err := outbox.Drop(ctx, w.db, obTable, w.urls[q], group, it.ID); err != nil {
			o.mu.Lock()
			delete(o.dropped, s.lid)
			o.mu.Unlock()
			w.violate("outbox: operator: drop %s of group %s: %v", it.ID, group, err)
			return
		}
		w.stat("outbox: operator dropped a held message", 1)
		return
	}
	if !o.raised.Load() && !reordered {
		return
	}
	if err := outbox.Release(ctx, w.db, obTable, w.urls[q], group, it.ID); err != nil {
		w.violate("outbox: operator: release group %s: %v", group, err)
		return
	}
	w.stat("outbox: operator released a held group", 1)
}

// obDropped reports whether the operator dropped lid (never to be applied).
func (w *world) obDropped(lid int) bool {
	o := w.ob
	o.mu.Lock()
	dropped, maybe := o.dropped[lid], o.maybeDropped[lid]
	o.mu.Unlock()
	if dropped || !maybe {
		return dropped
	}
	for _, ms := range o.byGroup {
		for _, s := range ms {
			if s.lid == lid {
				return o.tableDropped(s)
			}
		}
	}
	return false
}

// obSettled: everything written, the operator done with the queue's limit,
// nothing pending in the outbox.
func (w *world) obSettled(ctx context.Context) bool {
	o := w.ob
	if !o.s.On {
		return true
	}
	if !o.produced.Load() || !o.raised.Load() {
		return false
	}
	pending, err := outbox.ListPending(ctx, w.db, obTable, 1)
	return err == nil && len(pending) == 0
}

// obCheck: nothing pending, every message Write took marked published (or
// dropped by the operator, then never published), none failed or held.
func (w *world) obCheck(ctx context.Context) {
	o := w.ob
	if !o.s.On {
		return
	}
	o.gbCheck()
	w.obEdgesCheck(ctx)
	if pending, err := outbox.ListPending(ctx, w.db, obTable, 100); err != nil || len(pending) > 0 {
		var ps []string
		for _, p := range pending {
			ps = append(ps, fmt.Sprintf("%s/%d (held %q)", p.Group, p.Seq, p.Held))
		}
		w.violate("outbox: end: messages still pending: %v (%v)", ps, err)
	}
	for _, group := range slices.Sorted(maps.Keys(o.byGroup)) { // a replay reports in the same order
		ms := o.byGroup[group]
		// Paged: outbox.ListGroup returns one page, at most 1 MB of
		// items (a few messages at SQS's limit).
		items, err := o.group(ctx, w.urls[ms[0].queue]+"#"+group)
		if err != nil {
			w.violate("outbox: end: list group %s: %v", group, err)
			continue
		}
		if len(items) != len(ms) {
			var got, want []string
			for _, it := range items {
				got = append(got, it.Key)
			}
			for _, s := range ms {
				want = append(want, s.keyAttr)
			}
			w.violate("outbox: end: group %s holds %d messages %v, %d were written %v", group, len(items), got, len(ms), want)
			continue
		}
		for i, it := range items {
			s := ms[i]
			o.mu.Lock()
			pub, drop := o.published[s.lid], o.dropped[s.lid] || o.maybeDropped[s.lid] && it.Dropped != ""
			o.mu.Unlock()
			if it.Dropped != "" && pub && o.hadIt(s, it.Dropped) {
				w.stat("window: outbox: dropped at a hold, and SQS had a copy from before it (DESIGN.md, The outbox: what remains)", 1)
			}
			switch {
			case it.Key != s.keyAttr:
				w.violate("outbox: end: group %s seq %d is %s, want %s (write order)", group, it.Seq, it.Key, s.keyAttr)
			case it.Dropped != "" && pub && !o.hadIt(s, it.Dropped):
				w.mu.Lock()
				story := strings.Join(w.trace[s.lid], " | ")
				w.mu.Unlock()
				w.violate("outbox: end: message %d is marked dropped, never published, and SQS took it (hole 3); its story: %s", s.lid, story)
			case it.Failed != "" || it.Held != "" || it.SentAt.IsZero():
				w.violate("outbox: end: message %d not published as it is (failed %q, held %q, marked sent %v)", s.lid, it.Failed, it.Held, !it.SentAt.IsZero())
			case (it.Dropped != "") != drop:
				w.violate("outbox: end: message %d dropped %q, the operator dropped it: %v", s.lid, it.Dropped, drop)
			case !drop && !pub:
				w.violate("outbox: end: message %d marked published, and SQS never took it", s.lid)
			}
		}
	}
}

// group reads a group's message items, every page, in sequence order.
func (o *obHalf) group(ctx context.Context, pk string) ([]outbox.Item, error) {
	var items []outbox.Item
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := o.w.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(obTable), KeyConditionExpression: aws.String("#pk = :pk AND #sk > :zero"),
			ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: pk}, ":zero": &ddbtypes.AttributeValueMemberN{Value: "0"}},
			ConsistentRead:            aws.Bool(true), ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			str := func(k string) string { return dedup.GetS(it, k) }
			x := outbox.Item{Seq: num(it[outboxschema.AttrSK]), Key: str(outboxschema.AttrKey), Failed: str(outboxschema.AttrFailed),
				Held: str(outboxschema.AttrHeld), Dropped: str(outboxschema.AttrDropped)}
			if ms := num(it[outboxschema.AttrSentAt]); ms != 0 {
				x.SentAt = time.UnixMilli(ms)
			}
			items = append(items, x)
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return items, nil
		}
	}
}
