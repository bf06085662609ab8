package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/ddblimit"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// DynamoDB's limits on a commit (issue 19: every limit is a fault class).
// In the seeds that draw it (shape.Limits), a few messages of each source
// queue (up to five first messages of Q1's groups, sent together; three of
// Q2's) carry a commit that sits at, just under or just over one of
// TransactWriteItems' limits: 100 actions (the record, the effect's writes
// and, on Q1, the two outbox items of an Output.Send), 400 KB per item and
// 4 MB in all. The message body stays small: the effect derives the writes
// from the message's class. Q1's commits are optimistic, transactional or
// grouped (the incarnation's mode; in these seeds three optimistic
// incarnations in four group their commits), Q2's are claim mode (pool
// and Lambda).
//
//   - At and under a limit the commit must reach DynamoDB with exactly the
//     planned size (a check of the workload itself), apply once, and its
//     items exist at the end; a DLQ move of it is judged wrong (dlqjudge.go).
//   - Over a limit the product must refuse the commit before any request:
//     a permanent failure, the message in its DLQ, never applied, no item
//     of it written (on Q1 the hole-6 checks hold too: no retry, no
//     redelivery without a fault).
//   - No TransactWriteItems the product sends, alone or as a group
//     commit, passes a limit by the product's own count
//     (ddblimit.TransactionBytes, a lower bound): group commit must close a
//     group before 100 actions or 4 MB.
//
// At 4 MB exactly by the product's count (limTxAt) the request is made
// when the record is an update (transactional and claim mode: its key is
// all the bound counts of it), and memdynamo refuses it (it counts each
// action's key on top): DynamoDB's ValidationException, permanent. In
// optimistic mode the record is a put whose item the bound counts: over,
// refused before the request. Either way the message ends in its DLQ.
type limKind int

const (
	limWrites98  limKind = iota // 98 effect writes: 99 actions with the record
	limWrites99                 // 99 writes: exactly 100 actions
	limWrites100                // 100 writes: 101 actions, over
	limItemUnder                // one put of 409,599 bytes
	limItemAt                   // one put of exactly 409,600 bytes (400 KB)
	limItemOver                 // one put of 409,601 bytes, over
	limTxUnder                  // 4 MB - 16 KiB by the product's count
	limTxAt                     // exactly 4 MB by the product's count (see above)
	limTxOver                   // 4 MB + 1 byte, over
	numLimKinds
)

var limNames = [numLimKinds]string{"98 writes", "99 writes (100 actions)", "100 writes (101 actions)",
	"item 400 KB - 1", "item 400 KB", "item 400 KB + 1", "transaction 4 MB - 16 KiB", "transaction 4 MB", "transaction 4 MB + 1"}

func (k limKind) String() string { return limNames[k] }

// over: the product must refuse the commit before any request.
func (k limKind) over() bool { return k == limWrites100 || k == limItemOver || k == limTxOver }

// limSpec is a message's limit workload.
type limSpec struct {
	kind limKind
	send bool // Q1: two of the actions are the outbox items of one Output.Send
}

// dead: the message must end in its DLQ, never applied.
func (l *limSpec) dead() bool { return l != nil && (l.kind.over() || l.kind == limTxAt) }

const (
	limOutbox       = "sim-limits-outbox" // Q1's Output.Send in limit seeds (nobody relays it)
	limPerQueue     = 3                   // limit messages of Q2
	limPerQ1        = 5                   // of Q1, where group commits meet them
	limTxUnderBytes = ddblimit.TransactBytes - 16*1024
)

// limits is what the limit workloads saw.
type limits struct {
	mu         sync.Mutex
	optimistic map[string]bool // Q1 incarnations committing optimistically
	reqs       map[int]int     // logical id -> TransactWriteItems carrying its writes
}

// limWorkload gives limit classes to a few ordinary messages of each
// source queue, in the seeds whose shape draws it.
func (w *world) limWorkload() {
	w.lims = &limits{optimistic: map[string]bool{}, reqs: map[int]int{}}
	if !w.shape.Limits {
		return
	}
	for _, q := range []string{q1Name, q2Name} {
		var cands []*msgSpec
		for _, s := range w.msgs {
			next := w.byLid[s.lid+1]
			if s.queue != q || s.deadEnd() || s.fixable || strings.HasPrefix(s.dedupID, "shared-") || (next != nil && next.conflict) || w.obIsOutbox(s) {
				continue
			}
			if q == q1Name && s.gseq != 0 {
				continue // Q1: first messages of their groups, sent together (below)
			}
			cands = append(cands, s)
		}
		var chosen []*msgSpec
		n := limPerQueue
		if q == q1Name {
			n = limPerQ1
		}
		for i := 0; i < n && len(cands) > 0; i++ {
			x := hash64(w.cfg.Seed, "limits", q, strconv.Itoa(i))
			j := int(x % uint64(len(cands)))
			s := cands[j]
			cands = append(cands[:j], cands[j+1:]...)
			s.lim = &limSpec{kind: limKind((x >> 16) % uint64(numLimKinds))}
			s.lim.send = q == q1Name && s.lim.kind <= limWrites100 && (x>>32)%2 == 0 && w.wide.ttl == ttl
			// Over a limit on Q1: the hole-6 checks of an invalid commit.
			s.invalid = q == q1Name && s.lim.dead()
			w.stat("limits: workload "+s.lim.kind.String(), 1)
			chosen = append(chosen, s)
		}
		if q == q1Name {
			w.limTogether(chosen)
		}
	}
}

// limLatency is the effect's latency of Q1's limit messages.
const limLatency = time.Second

// limTogether sends Q1's limit messages (first of their groups) at once,
// with one effect latency: received together by a group-commit
// incarnation, their commits meet in one window, and a group holding
// one of them must close before 100 actions or 4 MB.
func (w *world) limTogether(ss []*msgSpec) {
	if len(ss) == 0 {
		return
	}
	at := ss[0].sends[0].at
	for _, s := range ss {
		at = min(at, s.sends[0].at)
	}
	for _, s := range ss {
		s.sends[0].at = at
	}
}

// obIsOutbox: s is one of the outbox half's messages (sent by a relay).
func (w *world) obIsOutbox(s *msgSpec) bool { return s.lid > obLidBase }

// limSetup creates the outbox table Q1's Output.Send writes to.
func (w *world) limSetup(ctx context.Context) error {
	if !w.shape.Limits {
		return nil
	}
	_, err := w.db.CreateTable(ctx, outboxschema.CreateTableInput(limOutbox))
	return err
}

// limOutboxFor is Q1's Config.Outbox: set in the seeds with limits.
func (w *world) limOutboxFor() *outbox.Outbox {
	if !w.shape.Limits {
		return nil
	}
	return outbox.New(w.db, limOutbox)
}

// noteMode records a Q1 incarnation's commit mode.
func (w *world) noteMode(p *proc, optimistic bool) {
	w.lims.mu.Lock()
	w.lims.optimistic[p.id] = optimistic
	w.lims.mu.Unlock()
}

func limPK(lid, i int) string { return fmt.Sprintf("lim#%d#%d", lid, i) }

// limItemOn is a put of item pk on tbl of exactly size bytes as DynamoDB
// counts them.
func limItemOn(tbl, pk string, size int) ddbtypes.TransactWriteItem {
	pad := size - ddblimit.ItemSize(map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "v": &ddbtypes.AttributeValueMemberS{}})
	return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(tbl), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "v": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", pad)}}}}
}

// outboxActions is how many transaction items the outbox adds for send: a
// head per group and an item per message.
func outboxActions(send []effect.Outgoing) int {
	groups := map[string]bool{}
	for _, m := range send {
		groups[m.QueueURL+"#"+m.Group] = true
	}
	return len(send) + len(groups)
}

// limFill adds to writes those of limit class k, on items pk(0), pk(1),
// ... of tbl, for a transaction that holds besides writes fixed actions of
// fixedBytes (by the product's count: the record, an outbox's items).
func limFill(k limKind, tbl string, pk func(i int) string, writes []ddbtypes.TransactWriteItem, fixed, fixedBytes int) []ddbtypes.TransactWriteItem {
	switch {
	case k <= limWrites100:
		n := ddblimit.TransactItems - 1 + int(k-limWrites98) - fixed - len(writes)
		for i := range n {
			writes = append(writes, ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(tbl),
				Key:              map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk(i)}},
				UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": numAV(1)}}})
		}
	case k <= limItemOver:
		writes = append(writes, limItemOn(tbl, pk(0), ddblimit.ItemBytes-1+int(k-limItemUnder)))
	default:
		want := limTxUnderBytes
		switch k {
		case limTxAt:
			want = ddblimit.TransactBytes
		case limTxOver:
			want = ddblimit.TransactBytes + 1
		}
		rest := want - ddblimit.TransactionBytes(writes) - fixedBytes
		const per = 400_000
		n := (rest + per - 1) / per
		for i := range n {
			size := rest / n
			if i < rest%n {
				size++
			}
			writes = append(writes, limItemOn(tbl, pk(i), size))
		}
	}
	return writes
}

// limApply adds s's limit writes to out, the effect's own writes: called
// by Q1's effect after the ledger, by Q2's after its downstream call (or
// instead of it, for a commit that cannot be made). p's verdict is noted
// where the product must refuse the commit before any request.
func (w *world) limApply(p *proc, in effect.Input, s *msgSpec, out effect.Output) effect.Output {
	l := s.lim
	if l.send {
		out.Send = []effect.Outgoing{{QueueURL: w.urls[q2Name], Group: fmt.Sprintf("lim%d", s.lid), ID: fmt.Sprintf("lim-%d", s.lid), Body: "limit"}}
	}
	// The record's share as the bound counts an update's: its key.
	record := ddblimit.ItemSize(map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: in.Key}})
	out.Writes = limFill(l.kind, table, func(i int) string { return limPK(s.lid, i) }, out.Writes, 1+outboxActions(out.Send), record)
	w.lims.mu.Lock()
	opt := w.lims.optimistic[p.id] && s.queue == q1Name
	w.lims.mu.Unlock()
	if l.kind.over() || (l.kind == limTxAt && opt) {
		// At 4 MB in an optimistic incarnation: refused before the
		// request when the record is the put, or by DynamoDB when the
		// commit fell back to a claim (an update): permanent either way,
		// and only DynamoDB's refusal is one for the hole-6 checks.
		w.permanent(p, s.lid, "effect: commit past a DynamoDB limit")
		if s.invalid && l.kind.over() {
			w.observeInvalid(p, s.key) // refused before the request: as DynamoDB's refusal
		}
	}
	w.stat("limits: effect ran ("+l.kind.String()+")", 1)
	return out
}

// limRequest checks a TransactWriteItems the product sends against
// DynamoDB's limits by the product's own count, before any fault: none
// may pass them. And a limit message's commit sent alone must have the
// size its class plans.
func (w *world) limRequest(p *proc, in *dynamodb.TransactWriteItemsInput, keys []string) {
	n := len(in.TransactItems)
	for _, v := range pastLimits(p.id, in, fmt.Sprintf("commits %v", keys)) {
		w.violate("%s", v)
	}
	lids := map[int]bool{}
	for _, pk := range txPKs(in) {
		if rest, ok := strings.CutPrefix(pk, "lim#"); ok {
			lid, _ := strconv.Atoi(rest[:strings.IndexByte(rest, '#')])
			lids[lid] = true
		}
	}
	for lid := range lids {
		s := w.byLid[lid]
		if s == nil || s.lim == nil {
			continue
		}
		w.lims.mu.Lock()
		w.lims.reqs[lid]++
		w.lims.mu.Unlock()
		mode := "claim"
		switch {
		case s.queue == q1Name && in.TransactItems[0].Put != nil:
			mode = "optimistic"
		case s.queue == q1Name:
			mode = "transactional, or an optimistic one's claim"
		}
		if len(keys) != 1 {
			w.stat("limits: sent in a group commit", 1)
			continue // judged by the limits above
		}
		w.stat("limits: sent alone ("+mode+")", 1)
		switch k := s.lim.kind; {
		case k <= limWrites100 && n != 99+int(k-limWrites98):
			w.violate("limits: sim: the commit of logical %d (%s) has %d actions, not %d: the workload is off the limit", lid, k, n, 99+int(k-limWrites98))
		case k == limTxAt && in.TransactItems[0].Update != nil && ddblimit.TransactionBytes(in.TransactItems) != ddblimit.TransactBytes:
			w.violate("limits: sim: the commit of logical %d (%s) counts %d bytes, not %d: the workload is off the limit", lid, k, ddblimit.TransactionBytes(in.TransactItems), ddblimit.TransactBytes)
		}
	}
}

// pastLimits says which of DynamoDB's limits a TransactWriteItems that
// who sent passes by the product's own count: none may reach DynamoDB.
func pastLimits(who string, in *dynamodb.TransactWriteItemsInput, what string) []string {
	var out []string
	if n := len(in.TransactItems); n > ddblimit.TransactItems {
		out = append(out, fmt.Sprintf("limits: %s sent a TransactWriteItems of %d actions (%s): at most %d, the product must refuse it before any request", who, n, what, ddblimit.TransactItems))
	}
	if b := ddblimit.TransactionBytes(in.TransactItems); b > ddblimit.TransactBytes {
		out = append(out, fmt.Sprintf("limits: %s sent a TransactWriteItems of at least %d bytes (%s): at most 4 MB (%d), the product must refuse it before any request", who, b, what, ddblimit.TransactBytes))
	}
	for _, it := range in.TransactItems {
		if it.Put != nil {
			if sz := ddblimit.ItemSize(it.Put.Item); sz > ddblimit.ItemBytes {
				out = append(out, fmt.Sprintf("limits: %s sent a put of %d bytes (%s): at most 400 KB (%d), the product must refuse it before any request", who, sz, what, ddblimit.ItemBytes))
			}
		}
	}
	return out
}

// txPKs are the partition keys a TransactWriteItems' puts and updates
// write.
func txPKs(in *dynamodb.TransactWriteItemsInput) []string {
	var out []string
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			out = append(out, pkOf(it.Put.Item))
		case it.Update != nil:
			out = append(out, pkOf(it.Update.Key))
		}
	}
	return out
}

// checkLimits: at the end, a limit message's first item exists if and
// only if the message committed, and one over a limit never reached
// DynamoDB. w.mu held.
func (w *world) checkLimits(ctx context.Context, bad func(string, ...any)) {
	for _, s := range w.msgs {
		if s.lim == nil {
			continue
		}
		w.stats["limits: checked ("+s.lim.kind.String()+")"]++
		got, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: limPK(s.lid, 0)}}})
		if err != nil {
			bad("limits: read %s: %v", limPK(s.lid, 0), err)
			continue
		}
		w.lims.mu.Lock()
		reqs := w.lims.reqs[s.lid]
		w.lims.mu.Unlock()
		switch {
		case s.lim.dead() && got.Item != nil:
			bad("limits: logical %d (%s, %s) must never commit, and its write %s exists; its story: %s", s.lid, s.lim.kind, s.queue, limPK(s.lid, 0), strings.Join(w.trace[s.lid], " | "))
		case !s.lim.dead() && w.committed[s.lid] && got.Item == nil:
			bad("limits: logical %d (%s, %s) committed, and its write %s does not exist; its story: %s", s.lid, s.lim.kind, s.queue, limPK(s.lid, 0), strings.Join(w.trace[s.lid], " | "))
		case s.lim.kind.over() && reqs > 0:
			bad("limits: logical %d (%s, %s) is over a limit, and %d TransactWriteItems carried its writes: it must be refused before any request", s.lid, s.lim.kind, s.queue, reqs)
		}
		if s.lim.kind == limTxAt && reqs > 0 {
			w.stats["limits: 4 MB commit sent (refused by DynamoDB)"]++
		}
	}
}

// The outbox relay's reads (outbox/relay.go): a sweep reads the messages
// of the groups it found in BatchGetItem requests of up to 100 keys, and
// asks again for the UnprocessedKeys of an answer cut at 16 MB; a group
// read alone is a Query whose page ends at 1 MB. In the seeds whose outbox
// half draws read pages (obShape.Pages), 11 groups of one queue hold 10
// messages each, written at once, and the relays read 10 per group
// (PerGroup): a sweep asks for 110 keys (a call of 100 and one of 10). In
// a quarter of them (PagesBig) the messages of 8 groups are 255 to 256
// KiB: the first call's answer holds 16 MB of them (about 64), the rest
// coming back as UnprocessedKeys, and a group read alone (after a failed
// BatchGetItem) gets a Query page of 4. Every invariant of the outbox half
// holds (published in order, nothing lost, nothing pending at the end), and
// no BatchGetItem the relay sends asks for more than 100 keys.

// pagesAt is when the read-pages workload writes all its messages.
const pagesAt = 20*time.Second + 500*time.Millisecond

// pages is the read-pages variant of an outbox shape.
func (o obShape) pages(big bool) obShape {
	o.Groups, o.Msgs, o.OneQueue, o.PerGroup, o.Sizes, o.Pages, o.PagesBig = 11, 10, true, 10, "pages", true, big
	return o
}

// pageSize is the size of a read-pages message of group g: small, or in
// the first 8 groups of PagesBig, at SQS's limit or up to 1 KiB under it.
func (o obShape) pageSize(g int, x uint64) int {
	if !o.PagesBig || g >= 8 {
		return 0
	}
	return outbox.MaxBodyBytes - int(x>>8)%1024
}

// obRead judges and counts a relay's BatchGetItem (keys asked, and what
// DynamoDB itself left unprocessed: past 16 MB) or Query (a page cut by
// its size before its Limit).
func obRead(p dynProc, op string, keys int, limit int32, got int, more bool) {
	switch op {
	case "BatchGetItem":
		if keys > ddblimit.BatchGetKeys {
			p.violate("limits: %s sent a BatchGetItem of %d keys: at most %d", p.name(), keys, ddblimit.BatchGetKeys)
		}
		if keys == ddblimit.BatchGetKeys {
			p.stat("outbox: BatchGetItem of 100 keys", 1)
		}
		if more {
			p.stat("outbox: BatchGetItem answer cut at 16 MB (UnprocessedKeys)", 1)
		}
	case "Query":
		if more && limit > 0 && got < int(limit) {
			p.stat("outbox: Query page cut at 1 MB", 1)
		}
	}
}

// pagesWritten: in a read-pages world a relay starts once every message
// is written, so that its first sweep finds them all pending. It reports
// false when ctx ended first.
func (o *obHalf) pagesWritten(ctx context.Context) bool {
	return waitUntil(ctx, func() bool { return !o.s.Pages || o.produced.Load() })
}

// waitUntil looks at cond every second until it holds (true) or ctx ends
// (false).
func waitUntil(ctx context.Context, cond func() bool) bool {
	for !cond() {
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
			return false
		}
	}
	return true
}

// unreadKeys are the outbox keys a relay process's BatchGetItem answers
// left unprocessed (past 16 MB, or throttled) and it has not asked for
// again. The relay must ask for exactly those keys again: a group whose
// keys wait there read by a Query instead is the relay dropping
// UnprocessedKeys (plant L9: a lane left out is read alone, or its rest on
// a later round). A process's sets are dropped when it starts a sweep (its
// index Query): a round cut short by its grace (Run) leaves its last set
// unasked, legitimately. After the relay's last attempt (3 asks again) it
// reads the chunk's groups alone: not tracked.
type unreadKeys struct {
	mu   sync.Mutex
	sets map[string]int // sorted keys -> times asked again so far
	byPK map[string]int // group (pk) -> its keys in sets
}

const relayLastReask = 3 // outbox/relay.go: loadIndexed's attempts after the first

func unreadSig(keys []string) string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return strings.Join(keys, "\x00")
}

// asked notes a BatchGetItem of keys (pk, sk pairs as pk "/" sk "/"),
// and returns how many times these keys have now been asked again (0: a
// first ask).
func (u *unreadKeys) asked(keys []string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.sets[unreadSig(keys)]
	if !ok {
		return 0
	}
	delete(u.sets, unreadSig(keys))
	for _, k := range keys {
		u.byPK[pkOfKeyStr(k)]--
	}
	return n + 1
}

// left notes the keys an answer to an ask of depth n left unprocessed.
func (u *unreadKeys) left(keys []string, n int) {
	if len(keys) == 0 || n >= relayLastReask {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sets == nil {
		u.sets, u.byPK = map[string]int{}, map[string]int{}
	}
	u.sets[unreadSig(keys)] = n
	for _, k := range keys {
		u.byPK[pkOfKeyStr(k)]++
	}
}

// sweep drops the sets: the process starts a new round.
func (u *unreadKeys) sweep() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.sets)
	clear(u.byPK)
}

// waiting reports whether keys of group pk wait to be asked for again.
func (u *unreadKeys) waiting(pk string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byPK[pk] > 0
}

// pkOfKeyStr is the pk of a keyStr of a pk and a numeric sk ("pk/sk/";
// the pk may hold '/').
func pkOfKeyStr(k string) string {
	k = strings.TrimSuffix(k, "/")
	return k[:max(0, strings.LastIndexByte(k, '/'))]
}
