package sim

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/aws/smithy-go"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/redrive"
)

// proc is one process of the simulated system: a pool worker's incarnation,
// a Lambda invocation, or a redrive. Each has its own faulty clients; when it
// dies, every call it makes fails before reaching the fakes and its
// in-memory state is gone (its context is cancelled; a new incarnation starts
// from nothing).
type proc struct {
	id   string
	w    *world
	dead atomic.Bool
	kill func() // cancels the process's contexts
	// stopNow stops a pool worker's process as StopAndCancel does
	// (forcedstop.go); nil for other processes.
	stopNow func()
	faults  atomic.Int32 // faults injected into its calls

	mu   sync.Mutex
	open map[string]bool // claim mode: keys whose downstream call ran, commit not yet seen
	// ran: dedup key -> the SQS message id of the delivery whose effect
	// this process ran last for it (the one its next commit of the key
	// applies).
	ran map[string]string

	frozenUntil atomic.Int64 // fence.go: the process is frozen until then (virtual UnixNano)
	unread      unreadKeys   // limits.go: a relay's UnprocessedKeys not asked for again
}

func (w *world) newProc(id string) *proc {
	return &proc{id: id, w: w, kill: func() {}, open: map[string]bool{}, ran: map[string]string{}}
}

// ranOf is the SQS message id of the delivery whose effect p ran last for
// key ("" if none).
func (p *proc) ranOf(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ran[key]
}

// faulted is a process as the injector's faults play out on it: a pool
// worker's or Lambda's (proc) or one of the chain's (cproc).
type faulted interface {
	name() string
	injector() *Injector
	isDead() bool
	// die kills the process (why: "crash before ...", "crash after ...").
	die(why string)
	// faulting is told of a call's fault before it plays out.
	faulting(subject string, k Kind)
	// sequencer orders the process's calls among those that arrive
	// together (sequencer.go); nil when off.
	sequencer() *sequencer
}

func (p *proc) name() string          { return p.id }
func (p *proc) injector() *Injector   { return p.w.inj }
func (p *proc) isDead() bool          { return p.dead.Load() }
func (p *proc) die(why string)        { p.w.crash(p, why) }
func (p *proc) sequencer() *sequencer { return p.w.seq }

// step orders the process's call of op on subject (sequencer.go).
func (p *proc) step(op, subject string) { p.w.seq.step(p.id, op, subject) }
func (p *proc) before(ctx context.Context, op, subject string) (Kind, string, error) {
	return before(ctx, p, op, subject)
}
func (p *proc) after(ctx context.Context, op string, k Kind, id string) error {
	return after(ctx, p, op, k, id)
}

func (p *proc) faulting(subject string, k Kind) {
	if k != None {
		p.faults.Add(1)
	}
	// Before the fault plays out: a paused commit opens the window at the
	// pause, not when the process wakes up.
	p.w.faultOnKey(p, subject, k)
}

// before runs the part of a call's fault that comes before it reaches the
// fake. A non-nil error: the call fails without taking effect.
func before(ctx context.Context, p faulted, op, subject string) (Kind, string, error) {
	seq := p.sequencer()
	call := seq.step(p.name(), op, subject)
	if p.isDead() {
		return None, "", errDead
	}
	if waitThaw(p) {
		seq.then(call, "thawed")
	}
	inj := p.injector()
	if pp, ok := p.(*proc); ok && pp.w.inOutage(pp, op) { // outage.go
		p.faulting(subject, Fail)
		return Fail, op + "|" + subject + "|outage", apiErr(op, Fail)
	}
	k, id := inj.decide(op, subject, p.name())
	p.faulting(subject, k)
	switch k {
	case Freeze:
		freezeProc(p, inj.delay(id))
		seq.then(call, "froze")
	case Fail, Timeout, Conflict:
		return k, id, apiErr(op, k)
	case Pause:
		// The process stalls here, whatever its context says, and comes
		// back as a zombie.
		time.Sleep(inj.delay(id))
		waitThaw(p) // it wakes into a freeze of its process
		seq.then(call, "paused")
	case Crash:
		p.die("crash before " + id)
		seq.then(call, "died")
		return k, id, errDead
	}
	if p.isDead() {
		return k, id, errDead
	}
	return k, id, ctx.Err()
}

// after runs the part of a call's fault that comes after it took effect.
func after(ctx context.Context, p faulted, op string, k Kind, id string) error {
	if waitThaw(p) { // an answer reaches a frozen process when it resumes
		p.sequencer().then(id, "answered thawed")
	}
	switch k {
	case Lost:
		return apiErr(op, Lost)
	case Slow:
		t := time.NewTimer(p.injector().delay(id))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		if ctx.Err() != nil { // also when it ended as the answer came: select picks at random
			return ctx.Err()
		}
		p.sequencer().then(id, "answered slowly")
	case CrashAfter:
		p.die("crash after " + id)
		p.sequencer().then(id, "died")
		return errDead
	}
	if p.isDead() {
		return errDead // it died while the call was under way: the answer goes nowhere
	}
	return nil
}

// conflictCancel is DynamoDB's answer to a transaction of n items that met
// another: cancelled for TransactionConflict, nothing applied.
func conflictCancel(n int) error {
	reasons := make([]ddbtypes.CancellationReason, n)
	for i := range reasons {
		reasons[i] = ddbtypes.CancellationReason{Code: aws.String("None")}
	}
	reasons[0] = ddbtypes.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String("sim: transaction conflict")}
	return &ddbtypes.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]"), CancellationReasons: reasons}
}

// ---------------------------------------------------------------- SQS

type sqsAPI interface {
	pool.SQS
	redrive.SQS
	exactly.SQS
}

var (
	_ sqsAPI      = (*faultySQS)(nil)
	_ exactly.SQS = (*faultySQS)(nil) // the Lambda handler is built with exactly.NewLambdaHandler
)

type faultySQS struct {
	p     *proc
	inner sqsAPI
}

// receiptID returns the message id inside a memsqs receipt handle.
func receiptID(h string) string {
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return h
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) < 3 {
		return h
	}
	return parts[2]
}

func (c *faultySQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q := qname(in.QueueUrl)
	k, id, err := c.p.before(ctx, "ReceiveMessage", q+"|"+c.p.id)
	if err != nil {
		return nil, err
	}
	out, err := c.receive(withCallID(ctx, c.p.id, "ReceiveMessage", id), q, in, opt...)
	if err != nil {
		return nil, err
	}
	c.p.w.observeReceive(c.p, q, out.Messages)
	c.p.w.obReceived(q, out.Messages)
	vis := visibility
	if q == q1Name {
		vis = c.p.w.shape.Vis1
	}
	if in.VisibilityTimeout > 0 {
		vis = time.Duration(in.VisibilityTimeout) * time.Second
	}
	for _, m := range out.Messages {
		// Answered late: slow, or to a frozen process, which reads it
		// when it resumes; either way the pool cannot date it.
		c.p.w.observeGrant(c.p, q, aws.ToString(m.ReceiptHandle), aws.ToString(m.MessageId), vis, true, k == Slow || c.p.frozen())
	}
	if err := c.p.after(ctx, "ReceiveMessage", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultySQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q := qname(in.QueueUrl)
	lids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		lids[i] = c.p.w.lidOfReceipt(aws.ToString(e.ReceiptHandle))
	}
	k, id, err := c.p.before(ctx, "DeleteMessageBatch", q+"|"+leastLid(lids))
	if err != nil {
		return nil, err
	}
	call := *in
	var failed []types.BatchResultErrorEntry
	if k == Partial {
		call.Entries = nil
		for i, e := range in.Entries {
			if c.p.w.inj.entryFails(id, lids[i]) {
				failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("sim: entry failed"), SenderFault: false})
				continue
			}
			call.Entries = append(call.Entries, e)
		}
	}
	for _, h := range inLidOrder(call.Entries, lids, in.Entries) {
		c.p.w.checkDelete(c.p, q, h)
	}
	out := &sqs.DeleteMessageBatchOutput{}
	if len(call.Entries) > 0 {
		out, err = c.inner.DeleteMessageBatch(ctx, &call, opt...)
		if err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	if err := c.p.after(ctx, "DeleteMessageBatch", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultySQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	q := qname(in.QueueUrl)
	lids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		lids[i] = c.p.w.lidOfReceipt(aws.ToString(e.ReceiptHandle))
	}
	k, id, err := c.p.before(ctx, "ChangeMessageVisibilityBatch", q+"|"+leastLid(lids))
	if err != nil {
		return nil, err
	}
	call := *in
	var failed []types.BatchResultErrorEntry
	if k == Partial {
		call.Entries = nil
		for i, e := range in.Entries {
			if c.p.w.inj.entryFails(id, lids[i]) {
				failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("sim: entry failed")})
				continue
			}
			call.Entries = append(call.Entries, e)
		}
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	if len(call.Entries) > 0 {
		out, err = c.inner.ChangeMessageVisibilityBatch(ctx, &call, opt...)
		if err != nil {
			return nil, err
		}
		byID := map[string]types.ChangeMessageVisibilityBatchRequestEntry{}
		for _, e := range call.Entries {
			byID[aws.ToString(e.Id)] = e
		}
		for _, s := range out.Successful {
			e := byID[aws.ToString(s.Id)]
			c.p.w.observeGrant(c.p, q, aws.ToString(e.ReceiptHandle), "", time.Duration(e.VisibilityTimeout)*time.Second, false, false)
		}
	}
	out.Failed = append(out.Failed, failed...)
	c.p.w.answerTakesTime(ctx, id) // beliefs.go
	if err := c.p.after(ctx, "ChangeMessageVisibilityBatch", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

// read runs a read-only call (a start-up or first-event read) through the
// injector; its subject names the process, so concurrent cold starts do not
// share attempt counts.
func read[T any](ctx context.Context, p *proc, op, subject string, call func() (T, error)) (T, error) {
	var zero T
	k, id, err := p.before(ctx, op, subject+"|"+p.id)
	if err != nil {
		return zero, err
	}
	out, err := call()
	if err != nil {
		return zero, err
	}
	if err := p.after(ctx, op, k, id); err != nil {
		return zero, err
	}
	return out, nil
}

func (c *faultySQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opt ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return read(ctx, c.p, "GetQueueAttributes", qname(in.QueueUrl), func() (*sqs.GetQueueAttributesOutput, error) {
		return c.inner.GetQueueAttributes(ctx, in, opt...)
	})
}

func (c *faultySQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opt ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	return read(ctx, c.p, "GetQueueUrl", aws.ToString(in.QueueName), func() (*sqs.GetQueueUrlOutput, error) {
		return c.inner.GetQueueUrl(ctx, in, opt...)
	})
}

func (c *faultySQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q := qname(in.QueueUrl)
	k, id, err := c.p.before(ctx, "DeleteMessage", q+"|"+c.p.w.lidOfReceipt(aws.ToString(in.ReceiptHandle)))
	if err != nil {
		return nil, err
	}
	c.p.w.checkDelete(c.p, q, aws.ToString(in.ReceiptHandle))
	out, err := c.inner.DeleteMessage(ctx, in, opt...)
	if err != nil {
		return nil, err
	}
	if err := c.p.after(ctx, "DeleteMessage", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultySQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q := qname(in.QueueUrl)
	k, id, err := c.p.before(ctx, "ChangeMessageVisibility", q+"|"+c.p.w.lidOfReceipt(aws.ToString(in.ReceiptHandle)))
	if err != nil {
		return nil, err
	}
	out, err := c.inner.ChangeMessageVisibility(ctx, in, opt...)
	if err != nil {
		return nil, err
	}
	if err := c.p.after(ctx, "ChangeMessageVisibility", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultySQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q := qname(in.QueueUrl)
	lid := lidOf(aws.ToString(in.MessageBody))
	if isDLQ(q) {
		c.p.w.observeDLQTry(c.p, lidNum(aws.ToString(in.MessageBody)))
	}
	k, id, err := c.p.before(ctx, "SendMessage", q+"|"+lid+"|"+aws.ToString(in.MessageGroupId))
	if err != nil {
		return nil, err
	}
	out, err := c.inner.SendMessage(ctx, in, opt...)
	if err != nil {
		return nil, err
	}
	c.p.w.observeSend(c.p, q, aws.ToString(in.MessageBody), aws.ToString(out.MessageId), aws.ToString(in.MessageDeduplicationId))
	if err := c.p.after(ctx, "SendMessage", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q := qname(in.QueueUrl)
	lids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		lids[i] = lidOf(aws.ToString(e.MessageBody))
	}
	k, id, err := c.p.before(ctx, "SendMessageBatch", q+"|"+leastLid(lids))
	if err != nil {
		return nil, err
	}
	call := *in
	var failed []types.BatchResultErrorEntry
	if k == Partial {
		call.Entries = nil
		for i, e := range in.Entries {
			if c.p.w.inj.entryFails(id, lids[i]) {
				failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("sim: entry failed")})
				continue
			}
			call.Entries = append(call.Entries, e)
		}
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(call.Entries) > 0 {
		out, err = c.inner.SendMessageBatch(ctx, &call, opt...)
		if err != nil {
			return nil, err
		}
		byID := map[string]types.SendMessageBatchRequestEntry{}
		for _, e := range call.Entries {
			byID[aws.ToString(e.Id)] = e
		}
		for _, s := range out.Successful {
			e := byID[aws.ToString(s.Id)]
			c.p.w.observeSend(c.p, q, aws.ToString(e.MessageBody), aws.ToString(s.MessageId), aws.ToString(e.MessageDeduplicationId))
		}
	}
	out.Failed = append(out.Failed, failed...)
	if err := c.p.after(ctx, "SendMessageBatch", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

// ---------------------------------------------------------------- DynamoDB

type ddbAPI interface {
	dedup.API
}

type faultyDynamo struct {
	p     *proc
	inner ddbAPI
}

var (
	_ dedup.API        = (*faultyDynamo)(nil)
	_ exactly.DynamoDB = (*faultyDynamo)(nil)
)

func pkOf(item map[string]ddbtypes.AttributeValue) string { return dedup.GetS(item, dedup.AttrPK) }

func (c *faultyDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	key := pkOf(in.Item)
	c.p.w.checkKey(c.p, in.Item)
	// A COMPLETED record put is an optimistic commit without writes: no
	// claim, and safe past the message's visibility (its condition decides).
	committed := dedup.GetS(in.Item, dedup.AttrStatus) == dedup.StatusCompleted
	if !committed {
		c.p.w.checkStart(c.p, key)
	}
	k, id, err := c.p.before(ctx, "PutItem", key)
	if err != nil {
		return nil, err
	}
	// Serialised with the other writes of the table, the record read just
	// before (fence.go).
	c.p.w.txMu.Lock()
	pre := c.p.w.preState(key)
	out, err := c.inner.PutItem(ctx, in, opt...)
	c.p.w.txMu.Unlock()
	c.p.w.afterRecordPut(c.p, in.Item, pre[key], err == nil, isCCF(err))
	if isCCF(err) {
		c.p.w.freezeAcrossSweep(c.p, key, in.Item, pre[key]) // ttlsweep.go
	}
	if err != nil {
		return nil, err
	}
	if committed {
		c.p.w.observeCommit(c.p, key, false)
	} else {
		c.p.w.observeClaim(c.p, key)
	}
	if err := c.p.after(ctx, "PutItem", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultyDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	key := pkOf(in.Key)
	if _, done := in.ExpressionAttributeValues[":done"]; done {
		c.p.w.freezeAtCommit(c.p, key)
		c.p.w.stopAtCommit(c.p, key)
	}
	k, id, err := c.p.before(ctx, "UpdateItem", key)
	if err != nil {
		return nil, err
	}
	c.p.w.txMu.Lock()
	pre := c.p.w.preState(key)
	out, err := c.inner.UpdateItem(ctx, in, opt...)
	c.p.w.txMu.Unlock()
	c.p.w.afterUpdate(c.p, in, pre, err)
	if err != nil {
		return nil, err
	}
	if _, done := in.ExpressionAttributeValues[":done"]; done {
		c.p.w.observeCommit(c.p, key, false)
	}
	if err := c.p.after(ctx, "UpdateItem", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultyDynamo) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	keys := committedKeys(in)
	c.p.w.limRequest(c.p, in, keys)
	for _, it := range in.TransactItems {
		if isCompletedPut(it) {
			c.p.w.checkKey(c.p, it.Put.Item)
		}
	}
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	optimistic := len(in.TransactItems) > 0 && in.TransactItems[0].Put != nil
	k, id, err := c.p.before(ctx, "TransactWriteItems", key)
	if err == nil || k == Conflict {
		c.p.w.checkHeldAtCommit(c.p, keys, k)
	}
	if k == Conflict {
		return nil, conflictCancel(len(in.TransactItems))
	}
	if err != nil {
		return nil, err
	}
	// Serialised with the log of first applications, so that the log's
	// order is the order in which the transactions took effect.
	c.p.w.txMu.Lock()
	pre := c.p.w.preState(txKeys(in)...)
	rmw := c.p.w.rmwBefore(in)
	out, err := c.inner.TransactWriteItems(ctx, in, opt...)
	c.p.w.afterTx(c.p, in, pre, err)
	if err == nil {
		for _, k := range keys {
			c.p.w.observeCommit(c.p, k, true)
		}
		c.p.w.judgeRMW(c.p, in, keys, rmw, k == Freeze || k == Pause)
	}
	// A group's transaction refused as a whole is no verdict on any of its
	// commits (each is then tried alone): only a commit alone is judged.
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" && len(keys) == 1 {
		c.p.w.observeInvalid(c.p, key)
		if s := c.p.w.byKey[key]; s != nil {
			c.p.w.permanent(c.p, s.lid, "commit rejected as invalid")
		}
	}
	if len(keys) == 1 {
		c.p.w.observeRefused(c.p, key, err) // carriedwrites.go
	}
	c.p.w.txMu.Unlock()
	switch {
	case len(keys) > 1:
		c.p.w.stat("dynamo: group commit tried", 1)
		if err == nil {
			c.p.w.stat("dynamo: commits applied in groups", len(keys))
		}
	case optimistic:
		c.p.w.stat("dynamo: optimistic commit tried", 1)
	}
	if err != nil {
		return nil, err
	}
	if err := c.p.after(ctx, "TransactWriteItems", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *faultyDynamo) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opt ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return read(ctx, c.p, "DescribeTable", aws.ToString(in.TableName), func() (*dynamodb.DescribeTableOutput, error) {
		return c.inner.DescribeTable(ctx, in, opt...)
	})
}

func (c *faultyDynamo) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opt ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return read(ctx, c.p, "DescribeTimeToLive", aws.ToString(in.TableName), func() (*dynamodb.DescribeTimeToLiveOutput, error) {
		return c.inner.DescribeTimeToLive(ctx, in, opt...)
	})
}
