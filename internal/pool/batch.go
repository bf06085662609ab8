package pool

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// maxBatch is SQS's limit of entries per batch request.
const maxBatch = 10

// batchOp is one entry for a batcher: a delete (visibility < 0) or a
// visibility change.
type batchOp struct {
	receipt    string
	visibility int32 // seconds; -1 means delete
	// done, set for a visibility extension, is told the entry's outcome:
	// nil when SQS confirmed it, else the call's or the entry's error (a
	// batchError for an entry). Its failures are reported as opExtend, not
	// as failed hand-backs. It is not called when a later operation on the
	// same receipt replaces the entry before it is sent. It answers whether
	// a failure counts: not when the delivery was settled meanwhile (a
	// delete may overtake an extension under way).
	done func(err error) (counts bool)
	at   time.Time // when it was queued (the first of a coalesced receipt)
	// parked, for a delete of a FIFO message whose group the pool still
	// holds other messages of: it is not due by age until unpark(group)
	// (the group's last message is settled), nor later than latest. SQS
	// hands out none of the group until all of them are deleted, so
	// waiting for them costs the group nothing, and the group's run goes in
	// one request instead of several part-filled ones.
	parked bool
	group  string
	latest time.Time // due by then anyway (zero: no bound but the delay)
}

// due is when op must be sent at the latest.
func (op *batchOp) due(delay time.Duration) time.Time {
	if op.parked {
		return op.latest
	}
	d := op.at.Add(delay)
	if !op.latest.IsZero() && op.latest.Before(d) {
		return op.latest
	}
	return d
}

// Ops reported to a batcher's onFail.
const (
	opDelete = "delete"
	opChange = "change_visibility" // hand-backs and final visibility changes
	opExtend = "extend"            // the keeper's visibility extensions
)

// batcher groups deletes and visibility changes of one queue into batch
// requests. An entry waits at most the delay for company: a batch goes out
// when 10 entries are waiting, when an entry has waited the delay, or at
// once when the pool says nothing else is coming (idle). A FIFO delete whose
// group has other messages in flight is parked until they are settled (see
// batchOp.parked), then waits the delay as any other. The delay is
// counted per entry, not per flush: entries that arrive while a request is
// under way wait for company too, instead of going out in the next request
// at once (at AWS-like latency that made batches of 2 to 4 at low
// concurrency). Delete batches go out concurrently (up to maxDeleteSends at
// once), so that a slow request never holds a due delete back; visibility
// changes go one request after another, in order (a heartbeat's extension
// must never overtake the final hand-back). It is owned by the pool:
// started by run, ended by close, which flushes what is pending and waits
// for the requests under way. onFail is told of failed entries per request
// and op (opDelete, opChange, opExtend).
type batcher struct {
	client  SQS
	url     string
	delay   time.Duration
	timeout time.Duration
	onFail  func(op string, n int, err error)

	mu      sync.Mutex
	deletes []batchOp // in the order they came, so the oldest is first
	changes []batchOp
	kick    chan struct{}
	now     chan struct{} // idle: flush without waiting out the delay
	closed  chan struct{}
	done    chan struct{}

	sends   sync.WaitGroup // delete requests under way
	sendSem chan struct{}  // bounds them

	// step, when set, is called before each round of sends (Config.Step).
	step func()
}

// maxDeleteSends bounds the DeleteMessageBatch requests of one queue under
// way at once: 16 requests of 10 at 15 ms each is about 10,000 deletes/s.
const maxDeleteSends = 16

func newBatcher(client SQS, url string, delay time.Duration, onFail func(op string, n int, err error)) *batcher {
	return &batcher{
		client: client, url: url, delay: delay, timeout: 30 * time.Second, onFail: onFail,
		kick: make(chan struct{}, 1), now: make(chan struct{}, 1), closed: make(chan struct{}), done: make(chan struct{}),
		sendSem: make(chan struct{}, maxDeleteSends),
	}
}

func (b *batcher) delete(receipt string) { b.add(batchOp{receipt: receipt, visibility: -1}) }

// deleteParked queues the delete of a message of group while the pool holds
// others of it: due when unpark(group) is called, or at latest.
func (b *batcher) deleteParked(receipt, group string, latest time.Time) {
	b.add(batchOp{receipt: receipt, visibility: -1, parked: true, group: group, latest: latest})
}

// unpark: the pool holds no more messages of group; its parked deletes wait
// the delay from now, as a delete queued now does.
func (b *batcher) unpark(group string) {
	now := time.Now()
	b.mu.Lock()
	n := 0
	for i := range b.deletes {
		if op := &b.deletes[i]; op.parked && op.group == group {
			op.parked, op.at = false, now
			n++
		}
	}
	b.mu.Unlock()
	if n > 0 { // their due time moved: the timer must be set again
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

func (b *batcher) changeVisibility(receipt string, d time.Duration) {
	b.add(batchOp{receipt: receipt, visibility: visibilitySeconds(d)})
}

// extend queues a visibility extension; done is told whether SQS confirmed
// it (see batchOp.done).
func (b *batcher) extend(receipt string, d time.Duration, done func(err error) bool) {
	b.add(batchOp{receipt: receipt, visibility: visibilitySeconds(d), done: done})
}

// add queues op. Operations on one receipt handle coalesce: a later
// visibility change replaces a pending one (a heartbeat's extension must not
// be sent after the final hand-back) and keeps its place and age, and a
// delete drops pending changes.
func (b *batcher) add(op batchOp) {
	op.at = time.Now()
	b.mu.Lock()
	timed := b.timed()
	var n int
	if op.visibility < 0 {
		b.changes = dropReceipt(b.changes, op.receipt)
		b.deletes = append(b.deletes, op)
		n = len(b.deletes)
	} else {
		for i := range b.changes {
			if b.changes[i].receipt == op.receipt {
				op.at = b.changes[i].at
				b.changes[i] = op
				b.mu.Unlock()
				return
			}
		}
		b.changes = append(b.changes, op)
		n = len(b.changes)
	}
	b.mu.Unlock()
	// With nothing timed before it (empty, or only parked deletes, due
	// later) op needs its flush scheduled; a full list needs it now.
	if !timed || n >= maxBatch {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// timed reports whether an entry that is not parked is pending: the timer
// is then set for a time no later than a new entry's due. b.mu held.
func (b *batcher) timed() bool {
	if len(b.changes) > 0 {
		return true
	}
	for i := range b.deletes {
		if !b.deletes[i].parked {
			return true
		}
	}
	return false
}

// idle tells the batcher that nothing more will join the pending entries
// soon (the pool holds no other message of the queue): waiting out the delay
// would only hold back the next receive of a FIFO group for nothing.
func (b *batcher) idle() {
	if b.empty() { // already sent: a signal now would only speed up the next lone entry
		return
	}
	select {
	case b.now <- struct{}{}:
	default:
	}
}

func dropReceipt(ops []batchOp, receipt string) []batchOp {
	for i := range ops {
		if ops[i].receipt == receipt {
			return append(ops[:i], ops[i+1:]...)
		}
	}
	return ops
}

// run sends what is due until close is called, then sends what is left and
// waits for the requests under way.
func (b *batcher) run() {
	defer close(b.done)
	defer b.sends.Wait()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		all := false
		select {
		case <-b.kick:
		case <-t.C:
		case <-b.now:
			all = true
		case <-b.closed:
		}
		if b.step != nil {
			b.step()
			// Signals that came meanwhile, or together with the one
			// select took (its pick among ready cases is random), join
			// this round: what it does then depends on none of those.
			select {
			case <-b.kick:
			default:
			}
			select {
			case <-b.now:
				all = true
			default:
			}
		}
		// Closed, whichever case select took: the last round sends all.
		select {
		case <-b.closed:
			for b.flushDue(true) {
			}
			return
		default:
		}
		for b.flushDue(all) {
		}
		// An idle signal that came while this round sent what it was about
		// is stale: kept, it would send the next lone entry at once.
		if b.empty() {
			select {
			case <-b.now:
			default:
			}
		}
		// Wake when the oldest entry left is due.
		t.Stop()
		if d, ok := b.nextDue(); ok {
			t.Reset(d)
		}
	}
}

// nextDue is how long until the first pending entry is due.
func (b *batcher) nextDue() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	if len(b.changes) > 0 { // the oldest first; they are never parked
		first = b.changes[0].due(b.delay)
	}
	for i := range b.deletes {
		if d := b.deletes[i].due(b.delay); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(time.Until(first), 0), true
}

func (b *batcher) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.deletes) == 0 && len(b.changes) == 0
}

// flushDue sends one batch of each kind that is due: full, or its oldest
// entry has waited the delay, or all (idle, closing). It reports whether
// anything was sent.
func (b *batcher) flushDue(all bool) bool {
	b.mu.Lock()
	now := time.Now()
	due := func(q []batchOp) bool {
		if len(q) >= maxBatch || len(q) > 0 && all {
			return true
		}
		for i := range q {
			if !q[i].due(b.delay).After(now) {
				return true
			}
		}
		return false
	}
	var dels, chs []batchOp
	if due(b.deletes) {
		dels = take(&b.deletes, now, b.delay)
	}
	if due(b.changes) {
		chs = take(&b.changes, now, b.delay)
	}
	b.mu.Unlock()
	if len(dels) == 0 && len(chs) == 0 {
		return false
	}
	if len(dels) > 0 {
		b.sendSem <- struct{}{}
		b.sends.Go(func() {
			defer func() { <-b.sendSem }()
			ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
			defer cancel()
			b.sendDeletes(ctx, dels)
		})
	}
	if len(chs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		defer cancel()
		b.sendChanges(ctx, chs)
	}
	return true
}

// take removes a batch from q: the entries due by now first, then the
// others in the order they came.
func take(q *[]batchOp, now time.Time, delay time.Duration) []batchOp {
	n := min(len(*q), maxBatch)
	out := make([]batchOp, 0, n)
	rest := (*q)[:0]
	for _, op := range *q { // due ones
		if len(out) < n && !op.due(delay).After(now) {
			out = append(out, op)
		} else {
			rest = append(rest, op)
		}
	}
	*q = rest
	if len(out) < n { // then the oldest of the others
		k := n - len(out)
		out = append(out, rest[:k]...)
		*q = append(rest[:0], rest[k:]...)
	}
	return out
}

func (b *batcher) sendDeletes(ctx context.Context, ops []batchOp) {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(ops))
	for i, op := range ops {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(op.receipt)}
	}
	out, err := b.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &b.url, Entries: entries})
	switch {
	case err != nil:
		b.onFail(opDelete, len(ops), err)
	case len(out.Failed) > 0:
		b.onFail(opDelete, len(out.Failed), batchErr(out.Failed))
	}
}

// sendChanges sends one ChangeMessageVisibilityBatch. Hand-backs and
// extensions are reported apart (opChange, opExtend); each extension learns
// its own outcome: confirmed only when its entry is in Successful.
func (b *batcher) sendChanges(ctx context.Context, ops []batchOp) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(ops))
	for i, op := range ops {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(op.receipt), VisibilityTimeout: op.visibility,
		}
	}
	out, err := b.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &b.url, Entries: entries})
	errs := make([]error, len(ops))
	if err != nil {
		// It may have taken effect, or not: an extension counts as failed
		// (and is tried again); SQS's deadline is then later than ours.
		for i := range errs {
			errs[i] = err
		}
	} else {
		for i := range errs {
			errs[i] = errNoResult
		}
		for _, s := range out.Successful {
			if i, ok := entryIndex(s.Id, len(ops)); ok {
				errs[i] = nil
			}
		}
		for _, f := range out.Failed {
			if i, ok := entryIndex(f.Id, len(ops)); ok {
				errs[i] = batchError{code: aws.ToString(f.Code), msg: aws.ToString(f.Message)}
			}
		}
	}
	var failed [2]int // hand-backs, extensions
	var first [2]error
	for i, op := range ops {
		k := 0
		counts := true
		if op.done != nil {
			k = 1
			counts = op.done(errs[i])
		}
		if errs[i] != nil && counts {
			failed[k]++
			if first[k] == nil {
				first[k] = errs[i]
			}
		}
	}
	for k, op := range []string{opChange, opExtend} {
		if failed[k] > 0 {
			b.onFail(op, failed[k], first[k])
		}
	}
}

// errNoResult: SQS's answer names an entry neither successful nor failed.
var errNoResult = errors.New("no result for the entry in the batch response")

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

func (b *batcher) close() {
	close(b.closed)
	<-b.done
}

type batchError struct{ code, msg string }

func (e batchError) Error() string { return e.code + ": " + e.msg }

// staleReceipt reports whether err is an entry's answer saying that its
// receipt handle no longer works: the message was received again, or is no
// longer in flight (its visibility lapsed, or it is gone). The worker no
// longer owns that delivery, and trying again cannot help.
func staleReceipt(err error) bool {
	var be batchError
	if !errors.As(err, &be) {
		return false
	}
	switch {
	case strings.HasSuffix(be.code, "ReceiptHandleIsInvalid"), strings.HasSuffix(be.code, "MessageNotInflight"):
		return true
	case strings.HasSuffix(be.code, "InvalidParameterValue"):
		// SQS's answer for an expired handle: "Value ... for parameter
		// ReceiptHandle is invalid. Reason: Message does not exist or is not
		// available for visibility timeout change."
		return strings.Contains(be.msg, "ReceiptHandle")
	}
	return false
}

func batchErr(f []types.BatchResultErrorEntry) error {
	return batchError{code: aws.ToString(f[0].Code), msg: aws.ToString(f[0].Message)}
}

// maxVisibility is SQS's ceiling for a message's visibility timeout.
const maxVisibility = 12 * time.Hour

// ceilingMargin is what an extension near maxVisibility leaves for the
// request's way to SQS, which counts the 12 hours from its receive to when
// the request reaches it: an extension asked for up to the ceiling on
// the pool's clock arrives after it, and SQS refuses it
// (InvalidParameterValue), as the simulation's ceiling world found.
const ceilingMargin = 10 * time.Second

// visibilitySeconds rounds d up to whole seconds ("no sooner than d"),
// within SQS's limits.
func visibilitySeconds(d time.Duration) int32 {
	d = min(max(d, 0), maxVisibility)
	return int32((d + time.Second - 1) / time.Second)
}
