package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// Standard queues (issue 19). In a shape that draws it, Q1 or Q2 (with its
// DLQ) is a standard queue instead of a FIFO one: no order, no groups, no
// deduplication id, a delay per message, and SQS's own duplicate
// deliveries (memsqs.WithDuplicates: a copy of a message, same id, that
// comes back while the message is in flight or after it was deleted). The
// product keys a standard queue's message by its idempotency-key attribute
// (the auto key source; it has no MessageDeduplicationId, and its
// MessageId differs between two sends of one logical message), so every
// producer of the workload on a standard queue sets it, and sends each
// duplicate as a standard-queue producer does: the same body and key again,
// a new SQS message. Every invariant holds as on a FIFO queue, except the
// order of a group, which a standard queue does not keep (run.go skips it).
// Nor does it run one message of an account at a time, as a FIFO group
// does: two of Q1's read-dependent writes (rmw.go) of one account would
// then race (a lost update, by design of the effect), so on a standard
// queue each message is its own account (its "group" names it).
//
// Inside the simulation a queue keeps its logical name (q1Name, ...); a
// standard queue's real name is that without ".fifo", as SQS wants it.

// logicalQ is the simulation's name of a queue from its real name.
func logicalQ(name string) string {
	if !sqsmsg.IsFIFO(name) {
		return name + ".fifo"
	}
	return name
}

// qname is the logical name of the queue of a URL.
func qname(url *string) string { return logicalQ(sqsmsg.QueueName(aws.ToString(url))) }

// std reports whether the logical queue q (a source queue or its DLQ) is a
// standard queue in this world.
func (w *world) std(q string) bool {
	switch q {
	case q1Name, dlq1Name:
		return w.shape.Q1Std
	case q2Name, dlq2Name:
		return w.shape.Q2Std
	}
	return false
}

// realName is the name SQS knows the logical queue q by.
func (w *world) realName(q string) string {
	if w.std(q) {
		return strings.TrimSuffix(q, ".fifo")
	}
	return q
}

// queueAttrs are q's attributes at its creation: a standard queue takes
// none of FIFO's.
func (w *world) queueAttrs(q string, attrs map[string]string) map[string]string {
	if !w.std(q) {
		attrs["FifoQueue"] = "true"
		return attrs
	}
	delete(attrs, "DeduplicationScope")
	delete(attrs, "FifoThroughputLimit")
	return attrs
}

// sendInput is the producer's request for one send of s: on a FIFO queue
// with its group and dedup id; on a standard queue with neither, the
// idempotency-key attribute always, and in about one send of three a delay
// of its own (up to two minutes).
func (w *world) sendInput(s *msgSpec, x send) *sqs.SendMessageInput {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(w.urls[s.queue]), MessageBody: aws.String(s.body)}
	if !w.std(s.queue) {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(s.group), aws.String(x.dedupID)
	} else if y := hash64(w.cfg.Seed, "delay", strconv.Itoa(s.lid), x.kind); y%3 == 0 {
		in.DelaySeconds = int32(1 + y%120)
	}
	if s.keyAttr != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{
			dedup.IdempotencyKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(s.keyAttr)},
		}
	}
	return in
}

// duplicate is memsqs's DuplicateFunc: at a message's first two receives
// from a standard source queue, in one of five, SQS leaves a copy of it that
// comes back 1 s to 3 min later (while the message is in flight, or after
// its delete). Not for invalid messages: the hole-6 check holds that such a
// message is not received again without a cause in its holder, and a copy
// is SQS's cause. Not in a DLQ: their end counts are exact.
func (w *world) duplicate(queue, body string, receive int) (time.Duration, bool) {
	q := logicalQ(queue)
	if isDLQ(q) || receive > 2 {
		return 0, false
	}
	lid := lidNum(body)
	if s := w.byLid[lid]; s == nil || s.invalid {
		return 0, false
	}
	y := hash64(w.cfg.Seed, "sqs duplicate", strconv.Itoa(lid), strconv.Itoa(receive))
	if y%5 != 0 {
		return 0, false
	}
	w.sqsDups.Add(1) // memsqs calls this under its lock: no w.mu here
	return time.Second + time.Duration(y>>8)%(3*time.Minute), true
}
