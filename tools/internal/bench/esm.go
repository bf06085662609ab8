package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

// Defaults of the modelled event source mapping.
const (
	// LambdaTimeout is the function timeout: each invocation's context
	// ends this long after it starts (the fakes' visibility timeout,
	// SweepVisibility, is the same, as AWS asks of a mapping's queue).
	LambdaTimeout = 30 * time.Second
	// windowPoll is how long a poller waits between two short polls while
	// its batching window has less than a second left (a long poll waits
	// whole seconds).
	windowPoll = 50 * time.Millisecond
	// maxBatchingWindow is Lambda's cap on MaximumBatchingWindowInSeconds.
	maxBatchingWindow = 5 * time.Minute
)

// lambdaHandle is a Lambda handler of SQS events: what lambda.Start takes.
type lambdaHandle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// esm models Lambda's SQS event source mapping with
// ReportBatchItemFailures on: conc poller loops (the mapping's maximum
// concurrency), each receiving a batch of up to batch messages (a 20 s
// long poll); while the batch is short and a batching window is set, it
// receives again until the batch is full or the window has passed since
// its first message. Then it invokes the handler with a context that ends
// after the function timeout and deletes, in one DeleteMessageBatch,
// every record not in the answer's batchItemFailures; those are left to
// come back after their visibility timeout. An invocation that returns an
// error, or reports an id that is not in its batch, keeps the whole batch,
// as the mapping does.
//
// Loop i starts at queue i and moves on one queue a batch, as the
// hand-written consumer's loops do (a mapping has one queue; several
// queues are several mappings sharing the concurrency).
type esm struct {
	sqs     fakeSQS
	urls    []string
	arns    []string // by queue, as GetQueueAttributes answers
	batch   int
	window  time.Duration
	timeout time.Duration
	handle  lambdaHandle

	invocations, records, kept, deleteFailures, receiveErrors prometheus.Counter
}

// newESM reads each queue's ARN (the event's eventSourceARN) and returns
// the mapping; reg, when not nil, gets its counters (names of their own:
// the handler exports the harness's).
func newESM(ctx context.Context, sq fakeSQS, urls []string, batch int, window time.Duration, handle lambdaHandle, reg prometheus.Registerer) (*esm, error) {
	if batch < 1 || batch > 10 {
		return nil, fmt.Errorf("event source mapping: batch size %d: want 1 to 10", batch)
	}
	e := &esm{sqs: sq, urls: urls, batch: batch, window: window, timeout: LambdaTimeout, handle: handle}
	for _, url := range urls {
		out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			return nil, fmt.Errorf("event source mapping: cannot read the ARN of %s: %w", url, err)
		}
		e.arns = append(e.arns, out.Attributes["QueueArn"])
	}
	c := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: name, Help: help})
		if reg != nil {
			reg.MustRegister(v)
		}
		return v
	}
	e.invocations = c("bench_esm_invocations_total", "invocations of the handler by the modelled event source mapping")
	e.records = c("bench_esm_records_total", "records handed to the handler")
	e.kept = c("bench_esm_records_kept_total", "records reported in batchItemFailures (or of a failed invocation), left to their visibility timeout")
	e.deleteFailures = c("bench_esm_delete_failures_total", "records the mapping could not delete")
	e.receiveErrors = c("bench_esm_receive_errors_total", "failed receives of the mapping's pollers")
	return e, nil
}

// run runs conc poller loops until ctx ends; a batch received is handled
// and deleted before its loop ends.
func (e *esm) run(ctx context.Context, conc int) error {
	done := make(chan struct{}, conc)
	for i := range conc {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := i; ctx.Err() == nil; k++ {
				e.poll(ctx, k%len(e.urls))
			}
		}()
	}
	for range conc {
		<-done
	}
	return nil
}

// poll gathers one batch from queue q, invokes the handler and deletes
// what it did not report.
func (e *esm) poll(ctx context.Context, q int) {
	url := e.urls[q]
	out, err := e.sqs.ReceiveMessage(ctx, receiveInput(url, int32(e.batch), 20))
	if err != nil {
		if ctx.Err() == nil {
			e.receiveErrors.Inc()
			_ = sleep(ctx, 100*time.Millisecond)
		}
		return
	}
	msgs := out.Messages
	if len(msgs) == 0 {
		return
	}
	msgs = e.fill(ctx, url, msgs, time.Now())
	// The batch in hand is invoked and settled even when ctx ends now.
	wctx := context.WithoutCancel(ctx)
	failed, err := e.invoke(wctx, e.arns[q], msgs)
	e.invocations.Inc()
	e.records.Add(float64(len(msgs)))
	if err != nil {
		e.kept.Add(float64(len(msgs)))
		return
	}
	var del []sqstypes.Message
	for _, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			del = append(del, m)
		}
	}
	e.kept.Add(float64(len(msgs) - len(del)))
	if len(del) == 0 {
		return
	}
	res, err := e.sqs.DeleteMessageBatch(wctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: deleteEntries(del)})
	if err != nil {
		e.deleteFailures.Add(float64(len(del)))
		return
	}
	e.deleteFailures.Add(float64(len(res.Failed)))
}

// fill receives again while the batch is short and the batching window,
// from first (the first message's receive), has time left: long polls of
// the window's whole seconds left, then short polls windowPoll apart.
func (e *esm) fill(ctx context.Context, url string, msgs []sqstypes.Message, first time.Time) []sqstypes.Message {
	for len(msgs) < e.batch && e.window > 0 && ctx.Err() == nil {
		left := e.window - time.Since(first)
		if left <= 0 {
			break
		}
		wait := int32(min(left/time.Second, 20))
		out, err := e.sqs.ReceiveMessage(ctx, receiveInput(url, int32(e.batch-len(msgs)), wait))
		if err != nil {
			if ctx.Err() == nil {
				e.receiveErrors.Inc()
			}
			break
		}
		msgs = append(msgs, out.Messages...)
		if len(out.Messages) == 0 && wait == 0 {
			if sleep(ctx, min(left, windowPoll)) != nil {
				break
			}
		}
	}
	return msgs
}

// invoke calls the handler on msgs with the function timeout and returns
// the ids it reported failed; an error keeps the whole batch.
func (e *esm) invoke(ctx context.Context, arn string, msgs []sqstypes.Message) (map[string]bool, error) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	ids := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		ev.Records[i] = sqsRecord(arn, m)
		ids[aws.ToString(m.MessageId)] = true
	}
	ictx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.handle(ictx, ev)
	if err != nil {
		return nil, err
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if !ids[f.ItemIdentifier] {
			return nil, fmt.Errorf("batchItemFailures names %q, not in the batch", f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// sqsRecord is m as Lambda delivers it: its system attributes (group,
// dedup id, sequence number, receive count, sent time) as the record's
// attributes, its queue's ARN as the event source.
func sqsRecord(arn string, m sqstypes.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: arnRegion(arn),
	}
	if len(m.MessageAttributes) > 0 {
		r.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
	}
	return r
}

// arnRegion is the region of arn:partition:sqs:region:account:name.
func arnRegion(arn string) string {
	if p := strings.Split(arn, ":"); len(p) == 6 {
		return p[3]
	}
	return ""
}

// handwrittenLambda is the Lambda handler a careful engineer writes by
// hand, with ReportBatchItemFailures on: the batch's records one after
// another in the batch's order, each record's ledger writes (account
// update and entry) in one TransactWriteItems. A record whose writes fail
// is reported, and on a FIFO queue so is every later record of its group
// in the batch (they must not overtake it). No dedup record: a redelivery
// applies twice.
type handwrittenLambda struct {
	db     fakeDynamoDB
	ledger effect.Effect

	applied, received, failed prometheus.Counter
}

func newHandwrittenLambda(db fakeDynamoDB, ledgerTable string, reg prometheus.Registerer) *handwrittenLambda {
	c := func(name string) prometheus.Counter {
		v := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: name, Help: name})
		reg.MustRegister(v)
		return v
	}
	return &handwrittenLambda{
		db: db, ledger: &builtin.Ledger{Table: ledgerTable},
		applied: c("effects_applied_total"), received: c("messages_received_total"), failed: c("permanent_failures_total"),
	}
}

// Handle is the handler.
func (h *handwrittenLambda) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	h.received.Add(float64(len(ev.Records)))
	var resp events.SQSEventResponse
	held := map[string]bool{} // FIFO groups (queue ARN and group) with a failed record
	for _, r := range ev.Records {
		fifo := strings.HasSuffix(r.EventSourceARN, ".fifo")
		group := r.EventSourceARN + "\x00" + r.Attributes["MessageGroupId"]
		if fifo && held[group] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			continue
		}
		if err := h.one(ctx, r); err != nil {
			h.failed.Inc()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			held[group] = true
			continue
		}
		h.applied.Inc()
	}
	return resp, nil
}

func (h *handwrittenLambda) one(ctx context.Context, r events.SQSMessage) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	msg := effect.Message{
		QueueName: r.EventSourceARN[strings.LastIndexByte(r.EventSourceARN, ':')+1:], ID: r.MessageId, Body: r.Body,
		Group: r.Attributes["MessageGroupId"], DedupID: r.Attributes["MessageDeduplicationId"], SequenceNumber: r.Attributes["SequenceNumber"],
	}
	return applyOnce(ctx, h.ledger, h.db, msg)
}

// applyOnce is a hand-written consumer's effect: the ledger's writes for
// msg, keyed by its dedup id (a standard queue's message has none: its
// id), in one TransactWriteItems; no dedup record.
func applyOnce(ctx context.Context, ledger effect.Effect, db fakeDynamoDB, msg effect.Message) error {
	key := msg.DedupID
	if key == "" {
		key = msg.ID
	}
	o, err := ledger.Apply(ctx, effect.Input{Message: msg, Key: key})
	if err != nil {
		return err
	}
	if len(o.Writes) == 0 {
		return errors.New("the ledger built no writes")
	}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: o.Writes})
	return err
}
