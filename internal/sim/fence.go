package sim

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// Fencing (issue 19): a process-wide freeze, and an invariant on every
// write of the dedup table checked at the fake's boundary.
//
// Freeze: every goroutine of the frozen process stops at its next call (and
// an answer under way reaches it only when it resumes): the pool's lanes,
// its keeper, the heartbeat that extends the dedup lease, the batcher. It
// resumes past the lease and the visibility timeout, so that another worker
// takes its claims over while it is still alive: the case fencing exists
// for. Its timers run on meanwhile (an effect's context still ends at the
// lease end), as a stopped process's kernel timers would.
//
// The invariant: every complete, extend and release of a claim that takes
// effect comes from the token that holds the record at that moment (read
// from the fake just before the write applies, serialised with it), and a
// claim takes an IN_PROGRESS record over only when its lease has ended.

// widened is what the widening of issue 19 keeps per run (fence.go, ttl.go,
// dlqjudge.go, rmw.go).
type widened struct {
	mu       sync.Mutex
	tokOwner map[string]*proc         // fencing token -> the process that wrote it
	lastTok  map[string]string        // proc|key -> the last token it claimed under
	commitAt map[string]time.Duration // key -> the last commit that set its expiry
	grants   map[int]int              // logical id -> applications allowed again (an expired record met)
	verdict  map[string]time.Duration // proc|lid -> last permanent verdict (dlqjudge.go)
	retryErr map[string]string        // proc|lid -> last retryable failure of its effect
	recvAt   map[string]time.Duration // proc|lid -> last receive (pool) or invocation (Lambda)
	maxRC    map[string]int           // SQS message id -> highest receive count seen
	judged   map[string]bool          // SQS message id -> its move by the redrive policy was judged
	frozeAt  map[string]time.Duration // proc -> its last freeze
	failedAt map[string]time.Duration // proc|lid -> its effect's last retryable failure
	justMet  map[string]bool          // proc|key -> its claim just replaced an expired COMPLETED record
	rmwLost  map[string][2]int64      // account -> balance and applications lost to excused stale commits (rmw.go)
	tokLease map[string]int64         // fencing token -> the lease_until (ms) the ledger last took under it (beliefs.go)

	ttl     time.Duration // the dedup records' TTL in this world
	guarded bool          // Q1's ledger writes its entry item (attribute_not_exists) too
}

func newWidened(seed uint64) *widened {
	x := &widened{
		tokOwner: map[string]*proc{}, lastTok: map[string]string{}, commitAt: map[string]time.Duration{},
		grants: map[int]int{}, verdict: map[string]time.Duration{}, retryErr: map[string]string{},
		recvAt: map[string]time.Duration{}, maxRC: map[string]int{}, judged: map[string]bool{}, frozeAt: map[string]time.Duration{}, failedAt: map[string]time.Duration{}, justMet: map[string]bool{},
		rmwLost: map[string][2]int64{}, tokLease: map[string]int64{},
		ttl: ttl, guarded: guardedWorld(seed),
	}
	if ttlWorld(seed) {
		x.ttl = shortTTL(seed)
		x.guarded = false // a duplicate past the TTL is applied again: no entry may refuse it
	}
	return x
}

// freezer is a process that can be frozen as a whole (a pool worker's or a
// Lambda environment's); the chain's processes take a freeze as a pause.
type freezer interface {
	freeze(d time.Duration)
	thaw() bool
}

// waitThaw returns when p is not frozen; true if it waited.
func waitThaw(p faulted) bool {
	if f, ok := p.(freezer); ok {
		return f.thaw()
	}
	return false
}

func freezeProc(p faulted, d time.Duration) {
	if f, ok := p.(freezer); ok {
		f.freeze(d)
		return
	}
	time.Sleep(d)
}

// freeze stops the whole process for d from now. The claim-mode keys it
// holds open (downstream called, commit not seen) are in the documented
// window, as for a crash: the process stalls past its lease.
func (p *proc) freeze(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := p.frozenUntil.Load()
		if cur >= until || p.frozenUntil.CompareAndSwap(cur, until) {
			break
		}
	}
	p.mu.Lock()
	var open []string
	for key := range p.open {
		open = append(open, key)
	}
	p.mu.Unlock()
	w := p.w
	w.mu.Lock()
	for _, key := range open {
		if s := w.byKey[key]; s != nil {
			w.excused[s.lid] = true
		}
	}
	w.stats["process: frozen (freeze)"]++
	w.mu.Unlock()
	x := w.wide
	x.mu.Lock()
	x.frozeAt[p.id] = time.Since(w.start)
	x.mu.Unlock()
	p.thaw()
}

// thaw returns when the process is not frozen; true if it waited.
func (p *proc) thaw() bool {
	waited := false
	for {
		d := time.Until(time.Unix(0, p.frozenUntil.Load()))
		if d <= 0 {
			return waited
		}
		time.Sleep(d)
		waited = true
	}
}

// frozeSince: p froze at or after since (the receive): a process frozen
// between the pool's check of its deadline and the claim's request sends
// the claim past the visibility, which no check can prevent. (An
// optimistic effect that fails falls back to a claim only while the pool
// still holds the message: process.Hooks.Held.) w.mu held.
func (w *world) frozeSince(p *proc, lid int, since time.Duration) bool {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	if at, ok := x.frozeAt[p.id]; ok && at >= since {
		w.stats["sim: claim past its visibility after a freeze of its process"]++
		return true
	}
	return false
}

func (p *proc) frozen() bool { return time.Now().UnixNano() < p.frozenUntil.Load() }

// ---------------------------------------------------------------- the boundary

// preState reads the items of keys from the fake as they are now. The
// caller holds w.txMu, which every write of a product process to the dedup
// table takes, so that nothing changes them before its write applies.
func (w *world) preState(keys ...string) map[string]map[string]ddbtypes.AttributeValue {
	out := map[string]map[string]ddbtypes.AttributeValue{}
	for _, k := range keys {
		if k == "" {
			continue
		}
		got, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: k}}, ConsistentRead: aws.Bool(true)})
		if err == nil && got.Item != nil {
			out[k] = got.Item
		}
	}
	return out
}

func isCCF(err error) bool {
	var ccf *ddbtypes.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// recordCancelled: a transaction whose item i failed its condition.
func itemCCF(err error, i int) bool {
	var tce *ddbtypes.TransactionCanceledException
	return errors.As(err, &tce) && i < len(tce.CancellationReasons) && aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// afterUpdate judges an UpdateItem of a record: a complete (":done"), an
// extend or a release (":lu", 0 for a release).
func (w *world) afterUpdate(p *proc, in *dynamodb.UpdateItemInput, pre map[string]map[string]ddbtypes.AttributeValue, err error) {
	vals := in.ExpressionAttributeValues
	_, done := vals[":done"]
	lu, fencedLU := vals[":lu"]
	if !done && !fencedLU {
		w.judgeNote(p, in, pre[pkOf(in.Key)], err) // ttlsweep.go
		return
	}
	key := pkOf(in.Key)
	op := "complete"
	if !done {
		op = "extend"
		if num(lu) == 0 {
			op = "release"
		}
	}
	w.judgeFenced(p, op, key, w.tokenOf(p, key, vals), pre[key], err == nil, isCCF(err))
	if err == nil && op != "complete" {
		w.leaseTaken(w.tokenOf(p, key, vals), num(lu))
	}
	if err == nil && op == "extend" {
		exp := pre[key][dedup.AttrExpiresAt]
		if e, ok := vals[":exp"]; ok {
			exp = e
		}
		w.leaseWithinExpiry(p, "extension", key, num(lu), num(exp))
	}
	if err == nil && done {
		w.committedAt(key)
	}
}

// tokenOf is the token a fenced write is made under: its ":tok", or the
// last one p claimed key under (a write that names none).
func (w *world) tokenOf(p *proc, key string, vals map[string]ddbtypes.AttributeValue) string {
	if v, ok := vals[":tok"].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastTok[p.id+"|"+key]
}

// judgeFenced: p's op on key under tok took effect (ok) or failed its
// condition (refused); pre is the record just before.
func (w *world) judgeFenced(p *proc, op, key, tok string, pre map[string]ddbtypes.AttributeValue, ok, refused bool) {
	preTok, preSt := dedup.GetS(pre, dedup.AttrToken), dedup.GetS(pre, dedup.AttrStatus)
	switch {
	case ok:
		holds := pre != nil && preTok == tok && (preSt == dedup.StatusInProgress || (op == "complete" && preSt == dedup.StatusCompleted))
		if holds {
			w.stat("fence: "+op+" by the record's holder", 1)
			return
		}
		lid := -1
		if s := w.byKey[key]; s != nil {
			lid = s.lid
		}
		w.violate("fencing: a %s of %s (logical %d) by %s under token %.8s took effect, but the record was %s under token %.8s (%s): only the token that holds the record may complete, extend or release it; faults of %s: %s",
			op, key, lid, p.id, tok, orNone(preSt), preTok, w.holder(preTok), p.id, w.faultsBy(p.id, 0, time.Since(w.start)))
	case refused && pre != nil && preTok != tok:
		w.stat("path: fenced: "+op+" under a stale token refused", 1)
	}
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// holder names the process that wrote tok.
func (w *world) holder(tok string) string {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.tokOwner[tok]; p != nil {
		return "held by " + p.id
	}
	return "holder unknown"
}

// afterRecordPut judges a put of a record (a claim, IN_PROGRESS, or an
// optimistic commit, COMPLETED) that took effect (ok) or failed its
// condition (refused), against the record just before.
func (w *world) afterRecordPut(p *proc, item map[string]ddbtypes.AttributeValue, pre map[string]ddbtypes.AttributeValue, ok, refused bool) {
	key, tok, st := pkOf(item), dedup.GetS(item, dedup.AttrToken), dedup.GetS(item, dedup.AttrStatus)
	if key == preflightKey || tok == "" {
		return
	}
	now := time.Since(w.start)
	if ok {
		if st == dedup.StatusInProgress {
			w.leaseWithinExpiry(p, "claim", key, num(item[dedup.AttrLeaseUntil]), num(item[dedup.AttrExpiresAt]))
			w.leaseTaken(tok, num(item[dedup.AttrLeaseUntil]))
		}
		x := w.wide
		x.mu.Lock()
		x.tokOwner[tok] = p
		x.lastTok[p.id+"|"+key] = tok
		x.mu.Unlock()
		if st == dedup.StatusCompleted {
			w.committedAt(key)
		}
	}
	if pre == nil {
		return
	}
	preTok, preSt := dedup.GetS(pre, dedup.AttrToken), dedup.GetS(pre, dedup.AttrStatus)
	if preTok == tok {
		return // a retry of its own put
	}
	switch {
	case ok && preSt == dedup.StatusInProgress:
		w.takenOver(p, key, pre, preTok, now)
	case ok && preSt == dedup.StatusCompleted:
		w.expiredCompletedMet(p, key, item, pre)
	case refused && preSt == dedup.StatusCompleted:
		w.completedBlocked(p, key, item, pre)
	}
}

// takenOver: p's put replaced another token's IN_PROGRESS record. Its lease
// must have ended (on the clocks of both, each within maxSkew of true time)
// or the record expired.
func (w *world) takenOver(p *proc, key string, pre map[string]ddbtypes.AttributeValue, preTok string, now time.Duration) {
	lu := time.UnixMilli(num(pre[dedup.AttrLeaseUntil]))
	exp := time.Unix(num(pre[dedup.AttrExpiresAt]), 0)
	trueNow := time.Now()
	if exp.Before(trueNow.Add(maxSkew)) {
		w.stat("path: expired record met (in progress)", 1)
	}
	if lu.After(trueNow.Add(2*maxSkew+10*time.Millisecond)) && !exp.Before(trueNow.Add(maxSkew+time.Second)) {
		w.violate("fencing: a live lease taken over: %s claimed %s while token %.8s (%s) held it until %s from now",
			p.id, key, preTok, w.holder(preTok), lu.Sub(trueNow).Round(time.Millisecond))
		return
	}
	x := w.wide
	x.mu.Lock()
	prev := x.tokOwner[preTok]
	x.mu.Unlock()
	switch {
	case prev == nil:
		w.stat("path: takeover of a claim", 1)
	case prev.frozen():
		w.stat("path: takeover of a live claim from a frozen worker", 1)
	case !prev.dead.Load():
		w.stat("path: takeover of a live claim (its holder alive, stalled)", 1)
	default:
		w.stat("path: takeover of a dead worker's claim", 1)
	}
}

// afterTx judges a TransactWriteItems on the dedup table: a CompleteTx (its
// first item the record's Update under ":tok") or optimistic commits (Puts
// of COMPLETED records, several in a group commit).
func (w *world) afterTx(p *proc, in *dynamodb.TransactWriteItemsInput, pre map[string]map[string]ddbtypes.AttributeValue, err error) {
	for i, it := range in.TransactItems {
		switch {
		case i == 0 && it.Update != nil:
			vals := it.Update.ExpressionAttributeValues
			if _, done := vals[":done"]; !done {
				continue
			}
			key := pkOf(it.Update.Key)
			w.judgeFenced(p, "complete", key, w.tokenOf(p, key, vals), pre[key], err == nil, itemCCF(err, 0))
			if err == nil {
				w.committedAt(key)
			}
		case it.Put != nil && dedup.GetS(it.Put.Item, dedup.AttrStatus) == dedup.StatusCompleted:
			key := pkOf(it.Put.Item)
			w.afterRecordPut(p, it.Put.Item, pre[key], err == nil, itemCCF(err, i))
		}
	}
	if err != nil {
		// One of the effect's own writes refused by its condition: a
		// permanent verdict on a commit alone.
		for i := 1; i < len(in.TransactItems); i++ {
			if itemCCF(err, i) && !isRecordPut(in.TransactItems[i]) {
				if s := w.keyOfTx(in); s != nil {
					w.permanent(p, s.lid, "an effect write's condition failed")
				}
				break
			}
		}
	}
}

// isRecordPut: a transaction's item past the first that puts a record (a
// group commit's); the others are an effect's writes.
func isRecordPut(it ddbtypes.TransactWriteItem) bool {
	return it.Put != nil && dedup.GetS(it.Put.Item, dedup.AttrStatus) != ""
}

// keyOfTx is the message a transaction of one commit commits.
func (w *world) keyOfTx(in *dynamodb.TransactWriteItemsInput) *msgSpec {
	keys := committedKeys(in)
	if len(keys) != 1 {
		return nil
	}
	return w.byKey[keys[0]]
}

// committedKeys lists the records a commit's transaction commits: the
// first item's Update of a claim's record (transactional), or the Puts of
// COMPLETED records (optimistic; a group commit holds several, each
// followed by its writes).
func committedKeys(in *dynamodb.TransactWriteItemsInput) []string {
	var keys []string
	for i, it := range in.TransactItems {
		switch {
		case i == 0 && it.Update != nil:
			keys = append(keys, pkOf(it.Update.Key))
		case isCompletedPut(it):
			keys = append(keys, pkOf(it.Put.Item))
		}
	}
	return keys
}

func isCompletedPut(it ddbtypes.TransactWriteItem) bool {
	return it.Put != nil && dedup.GetS(it.Put.Item, dedup.AttrStatus) == dedup.StatusCompleted
}

// txKeys lists the record keys a transaction writes.
func txKeys(in *dynamodb.TransactWriteItemsInput) []string {
	var keys []string
	for i, it := range in.TransactItems {
		switch {
		case i == 0 && it.Update != nil:
			keys = append(keys, pkOf(it.Update.Key))
		case it.Put != nil && dedup.GetS(it.Put.Item, dedup.AttrStatus) != "":
			keys = append(keys, pkOf(it.Put.Item))
		}
	}
	return keys
}
