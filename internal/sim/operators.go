package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/operator"
	"github.com/exactlyonce/exactly/internal/redrive"
)

// An operator is a person at the console or the CLI, acting at moments
// drawn from the seed while workers run, faults strike and the scheduled
// redrive waits: it reads every listing, forgets records Stuck lists (some
// still worked on by a frozen or slow worker: a lease ends while its holder
// lives), and lists the dead letters as a dry run does, on a DLQ too large
// to read within the listing's visibility. Each action goes through the
// code the console and the CLI call (internal/operator, internal/redrive),
// with the operator's own process and faulty clients, and is judged when it
// is made by what its page promises; the world's end checks judge the rest
// (no effect applied twice, nothing lost, group order).
const (
	opFrom, opUntil = time.Minute, redriveAt - time.Minute // the operators' window
	opDryRunFor     = 20 * time.Minute                     // a dry run that has not ended by then never will
)

// operate runs the operators of one world until their last action; a world
// has none, or up to six actions, drawn from its own stream of the seed.
func (w *world) operate(ctx context.Context) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 0x09e7a70)) //nolint:gosec // the seed's stream: a replay draws the same operators
	n := rng.IntN(7)
	at := make([]time.Duration, n)
	for i := range at {
		at[i] = opFrom + time.Duration(rng.Int64N(int64(opUntil-opFrom)))
	}
	slices.Sort(at) // a person at a time
	for i, t := range at {
		time.Sleep(t - time.Since(w.start))
		if ctx.Err() != nil {
			return
		}
		p := w.newProc(fmt.Sprintf("operator.%d", i))
		switch rng.IntN(4) {
		case 0:
			w.opListings(ctx, p)
			// and a lookup, drawn apart from the stream (the seeds'
			// other draws stay what they were)
			w.opFind(ctx, p, int(hash64(w.cfg.Seed, "opfind", strconv.Itoa(i))%(1<<20)))
		case 1:
			w.opForget(ctx, p, rng.IntN(1<<20), time.Duration(rng.Int64N(int64(30*time.Second))))
		case 2:
			w.opDryRun(ctx, p, time.Duration(1+rng.IntN(5))*time.Second, time.Duration(rng.IntN(3))*time.Second)
		case 3:
			w.opRedrive(ctx, w.newProc(fmt.Sprintf("redrive.operator.%d", i)), rng) // named a redrive: observeSend
		}
	}
}

// opListings reads what the console's pages show: each queue's overview,
// the dedup table's, the stuck records and the conflicts. Stuck promises
// IN_PROGRESS records whose lease has ended.
func (w *world) opListings(ctx context.Context, p *proc) {
	sq := &faultySQS{p: p, inner: w.sqs}
	for _, q := range []string{q1Name, dlq1Name, q2Name, dlq2Name} {
		_, _ = operator.DescribeQueue(ctx, sq, w.urls[q])
	}
	_, _ = operator.DescribeTable(ctx, &faultyDynamo{p: p, inner: w.db}, table)
	db := &opDB{p: p, w: w}
	now := time.Now()
	page, err := operator.Stuck(ctx, db, table, now, nil, 0)
	if err == nil {
		for _, r := range page.Records {
			if r.Status != dedup.StatusInProgress || !r.LeaseUntil.Before(now) {
				w.violate("operator: Stuck listed %s (%s, lease until %s at %s): not an IN_PROGRESS record whose lease ended",
					r.Key, r.Status, r.LeaseUntil.Sub(w.start), now.Sub(w.start))
			}
		}
	}
	_, _ = operator.Conflicts(ctx, db, table, now, nil, 0)
	w.stat("world: operator listings read", 1)
}

// opForget lists the stuck records, reads the confirmation page for one
// of them a person's while (think), and confirms. The page promises: "This
// will delete the record K from the dedup table, if it is still this record
// (status S, claim token T). Its message's next delivery, or a redrive of
// it, runs the effect again." What Forget deleted is judged against that
// (and the lease it was shown, which operator.Forget also conditions on);
// the effect's second run it announces is the documented window.
func (w *world) opForget(ctx context.Context, p *proc, pick int, think time.Duration) {
	if hash64(w.cfg.Seed, "commitfreeze", strconv.Itoa(pick))%2 == 0 {
		w.opForgetAcrossACommit(ctx, p)
		return
	}
	db := &opDB{p: p, w: w}
	page, err := operator.Stuck(ctx, db, table, time.Now(), nil, 0)
	if err != nil || len(page.Records) == 0 {
		return
	}
	shown := page.Records[pick%len(page.Records)]
	// A record whose worker is frozen after its effect's call, its commit
	// not sent: the operator confirms just after the worker thaws, as it
	// commits the record under the same token (hole 1's race).
	for _, r := range page.Records {
		if h, until := w.frozenHolder(r.Key); h != nil && until < 5*time.Minute {
			shown, think = r, until+think%(3*time.Second)
			w.stat("world: operator forgets of a record whose worker thaws in the pause", 1)
			break
		}
	}
	time.Sleep(think)
	w.confirmForget(ctx, p, db, shown)
}

// confirmForget confirms the Forget of the record shown and judges what it
// deleted by the page's promise.
func (w *world) confirmForget(ctx context.Context, p *proc, db *opDB, shown *dedup.Record) {
	w.stat("world: operator forgets confirmed", 1)
	err := operator.Forget(ctx, db, table, shown)
	old, deleted := db.takeDeleted(shown.Key)
	if !deleted {
		if err == nil {
			w.violate("operator: Forget of %s reported success and deleted nothing", shown.Key)
		}
		return
	}
	st, tok := dedup.GetS(old, dedup.AttrStatus), dedup.GetS(old, dedup.AttrToken)
	var lu string
	if n, ok := old[dedup.AttrLeaseUntil].(*ddbtypes.AttributeValueMemberN); ok {
		lu = n.Value
	}
	if st != shown.Status || tok != shown.Token || lu != fmt.Sprint(shown.LeaseUntil.UnixMilli()) {
		w.violate("operator: Forget of %s deleted a %s record (token %s, lease until %s ms): its page promised to delete it only if still %s with token %s, lease until %d ms",
			shown.Key, st, tok, lu, shown.Status, shown.Token, shown.LeaseUntil.UnixMilli())
		return
	}
	w.stat("world: operator records forgotten", 1)
	// As promised, the next delivery runs the effect again: the window is
	// open for a downstream call the forgotten claim made, or makes yet.
	if s := w.byKey[shown.Key]; s != nil {
		w.mu.Lock()
		w.excused[s.lid] = true
		w.tr(s.lid, "%s forgot %s (token %s)", p.id, shown.Key, shown.Token)
		w.mu.Unlock()
	}
}

// commitFreeze is an operator's Forget across a commit waiting for its
// moment (opForgetAcrossACommit): the next claim-mode commit of a Q2 key
// freezes its process for d and is told on taken.
type commitFreeze struct {
	d     time.Duration
	taken chan commitFrozen // buffered: one
}

// opFreeze is a freeze freezeAtCommit made: which process, and when it
// ended (since the world's start).
type opFreeze struct {
	proc string
	end  time.Duration
}

type commitFrozen struct {
	key string
	at  time.Time
}

// opForgetAcrossACommit is hole 1's race, made to happen: a claim-mode
// worker of Q2 (a pool worker or a Lambda environment) freezes whole at its
// commit call, its effect's downstream call made, for a little longer than
// a lease; the operator reads Stuck once the lease has ended (the record
// is listed), the worker thaws and commits the record under the same
// token, and the operator confirms the Forget the page showed. The page
// promised to delete the record only if it is still what it showed: a
// Forget that deletes the COMPLETED record lets the next copy of the
// message run its effect again (judged by confirmForget).
func (w *world) opForgetAcrossACommit(ctx context.Context, p *proc) {
	cf := &commitFreeze{d: lease + 1500*time.Millisecond, taken: make(chan commitFrozen, 1)}
	w.mu.Lock()
	w.commitFreeze = cf
	w.mu.Unlock()
	var fr commitFrozen
	wait := time.NewTimer(2 * time.Minute)
	defer wait.Stop()
	select {
	case fr = <-cf.taken:
	case <-wait.C:
	case <-ctx.Done():
	}
	if fr.key == "" {
		w.mu.Lock()
		if w.commitFreeze == cf {
			w.commitFreeze = nil
		}
		w.mu.Unlock()
		select {
		case fr = <-cf.taken: // taken as the wait ended
		default:
			return
		}
	}
	// Its lease was extended at most a lease before the freeze: ended now.
	time.Sleep(time.Until(fr.at.Add(lease + 500*time.Millisecond)))
	db := &opDB{p: p, w: w}
	page, err := operator.Stuck(ctx, db, table, time.Now(), nil, 0)
	if err != nil {
		return
	}
	var shown *dedup.Record
	for _, r := range page.Records {
		if r.Key == fr.key {
			shown = r
		}
	}
	if shown == nil {
		return
	}
	w.stat("world: operator forgets of a record whose commit thaws in the pause", 1)
	time.Sleep(time.Until(fr.at.Add(cf.d + 5*time.Second))) // the worker thaws and commits
	w.confirmForget(ctx, p, db, shown)
}

// freezeAtCommit freezes p at its claim-mode commit of key when an
// operator waits for that moment (opForgetAcrossACommit).
func (w *world) freezeAtCommit(p *proc, key string) {
	w.mu.Lock()
	cf, s := w.commitFreeze, w.byKey[key]
	if cf == nil || s == nil || s.queue != q2Name || p.isDead() {
		w.mu.Unlock()
		return
	}
	w.commitFreeze = nil
	w.opFreezes = append(w.opFreezes, opFreeze{proc: p.id, end: time.Since(w.start) + cf.d})
	w.mu.Unlock()
	cf.taken <- commitFrozen{key: key, at: time.Now()}
	w.stat("world: processes frozen at a commit for an operator's Forget", 1)
	p.freeze(cf.d)
}

// opDryRun lists DLQ1 as `worker redrive --dry-run` and the console's
// preview do, with the given visibility, over a link that takes latency
// per receive: with more than ten messages per visibility's worth of
// receives, the first are visible again before the last are read. The
// preview promises what would move and moves nothing; the listing must
// end, list each message once, and move nothing.
func (w *world) opDryRun(ctx context.Context, p *proc, vis, latency time.Duration) {
	dctx, cancel := context.WithTimeout(ctx, opDryRunFor)
	defer cancel()
	sq := &slowReceives{faultySQS: &faultySQS{p: p, inner: w.sqs}, latency: latency}
	res, err := redrive.Run(dctx, sq, redrive.Config{DLQ: w.urls[dlq1Name], Queue: w.urls[q1Name], DryRun: true, Visibility: vis})
	w.stat("world: operator dry runs", 1)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		w.violate("operator: a dry run of %s (visibility %s, %s a receive) had not ended after %s (%d receives, %d listed)",
			dlq1Name, vis, latency, opDryRunFor, sq.receives, len(res.Listed))
	}
	if res.Moved != 0 {
		w.violate("operator: a dry run moved %d messages", res.Moved)
	}
	seen := map[string]bool{}
	for _, l := range res.Listed {
		if seen[l.ID] {
			w.violate("operator: a dry run of %s listed message %s twice", dlq1Name, l.ID)
			return
		}
		seen[l.ID] = true
	}
}

// opFind looks a dead-lettered message of Q1 up as the console's "Find a
// message" and `worker find` do (operator.ScopedKey, then operator.Find:
// its record, and a search of its DLQ as a dry run lists it), by its key or
// by the message id the worker's "moved to the dead-letter queue" line
// logged. Judged: a message the world knows is in DLQ1 (the product's copy
// sent, no redrive since, before the search and after it) is not reported
// "not in" DLQ1 by a search that read all of DLQ1, none of it hidden by
// another reader (hole 6); one it met is named by its own key.
func (w *world) opFind(ctx context.Context, p *proc, pick int) {
	w.mu.Lock()
	now := time.Since(w.start)
	var cands []int
	for _, lid := range slices.Sorted(maps.Keys(w.dlqSrc)) {
		if s := w.byLid[lid]; s != nil && s.queue == q1Name && w.inDLQAt(lid, now) {
			cands = append(cands, lid)
		}
	}
	w.mu.Unlock()
	if len(cands) == 0 {
		return
	}
	lid := cands[pick%len(cands)]
	s := w.byLid[lid]
	w.mu.Lock()
	src := w.dlqSrc[lid]
	w.mu.Unlock()
	sq := &faultySQS{p: p, inner: w.sqs}
	db := &opDB{p: p, w: w}
	l := operator.Lookup{Namespace: namespace, Key: s.key}
	by := "key"
	if pick%2 == 0 {
		l, by = operator.Lookup{Namespace: namespace, Queue: w.urls[q1Name], Group: s.group, MessageID: src}, "message id"
	}
	key, err := operator.ScopedKey(ctx, sq, l)
	if err != nil {
		return
	}
	read := func(key string) (*dedup.Record, error) { return operator.ReadRecord(ctx, db, table, key) }
	wh, err := operator.Find(ctx, sq, read, operator.LocateRequest{QueueURL: w.urls[q1Name], Key: key, Namespace: namespace,
		MessageID: l.MessageID, Now: time.Now(), Max: 1000, Wait: time.Second})
	w.stat("world: operator finds", 1)
	if err != nil {
		return
	}
	w.mu.Lock()
	still := w.inDLQAt(lid, time.Since(w.start))
	w.mu.Unlock()
	// A search that read every message of the DLQ, none hidden by another
	// reader (the scheduled redrive, a dry run) when it began.
	d := wh.Queue.DLQDepth
	// The scheduled redrive (from redriveAt) moves the DLQ while the world
	// learns of its copies only from their answers: judged before it.
	definite := wh.DLQSearched && wh.SearchErr == "" && !wh.Bounded && d.InFlight == 0 && wh.Searched >= d.Visible &&
		time.Since(w.start) < redriveAt
	switch {
	case wh.Dead != nil:
		w.stat("world: operator finds that met the message in its DLQ", 1)
		if wh.Key != s.key {
			w.violate("operator: Find of message %d (by %s) met it in %s and names key %s, want %s", lid, by, dlq1Name, wh.Key, s.key)
		}
	case still && definite:
		w.violate("operator: Find of message %d (by %s, key %s) read all %d messages of %s and says %q: the message is there (hole 6)",
			lid, by, key, wh.Searched, dlq1Name, wh.Verdict)
	}
}

// slowReceives takes latency before every ReceiveMessage.
type slowReceives struct {
	*faultySQS
	latency  time.Duration
	receives int
}

func (s *slowReceives) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.receives++
	time.Sleep(s.latency)
	return s.faultySQS.ReceiveMessage(ctx, in, opt...)
}

// opDB is the operator's dedup table: its reads and its one delete go
// through the process's faults and the sequencer, and the delete asks for
// the item it deleted, so that it can be judged against the page.
type opDB struct {
	p       *proc
	w       *world
	deleted map[string]map[string]ddbtypes.AttributeValue
}

func (d *opDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return read(ctx, d.p, "GetItem", "", func() (*dynamodb.GetItemOutput, error) { return d.w.db.GetItem(ctx, in, opt...) })
}

func (d *opDB) Scan(ctx context.Context, in *dynamodb.ScanInput, opt ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return read(ctx, d.p, "Scan", "", func() (*dynamodb.ScanOutput, error) { return d.w.db.Scan(ctx, in, opt...) })
}

func (d *opDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	key := dedup.GetS(in.Key, dedup.AttrPK)
	k, id, err := d.p.before(ctx, "DeleteItem", key)
	if err != nil {
		return nil, err
	}
	asked := *in
	asked.ReturnValues = ddbtypes.ReturnValueAllOld
	out, err := d.w.db.DeleteItem(ctx, &asked, opt...)
	if err != nil {
		return nil, err
	}
	if len(out.Attributes) > 0 {
		if d.deleted == nil {
			d.deleted = map[string]map[string]ddbtypes.AttributeValue{}
		}
		d.deleted[key] = out.Attributes
	}
	if err := d.p.after(ctx, "DeleteItem", k, id); err != nil {
		return nil, err // it took effect; its answer is lost
	}
	if in.ReturnValues != ddbtypes.ReturnValueAllOld {
		out.Attributes = nil // as the caller asked
	}
	return out, nil
}

// takeDeleted is the item the delete of key removed, if it removed one.
func (d *opDB) takeDeleted(key string) (map[string]ddbtypes.AttributeValue, bool) {
	it, ok := d.deleted[key]
	delete(d.deleted, key)
	return it, ok
}

// frozenHolder is the frozen process that called key's effect last and
// has not seen its commit, and how long until it thaws.
func (w *world) frozenHolder(key string) (*proc, time.Duration) {
	w.mu.Lock()
	h := w.effectBy[key]
	w.mu.Unlock()
	if h == nil || !h.frozen() {
		return nil, 0
	}
	h.mu.Lock()
	open := h.open[key]
	h.mu.Unlock()
	if !open {
		return nil, 0
	}
	return h, time.Until(time.Unix(0, h.frozenUntil.Load()))
}
