// Package effect defines what the worker runs exactly once per logical message:
// the Effect interface, what it is given and returns, and the typed errors
// that steer a message after a failure. It is the contract an effect
// implements, and nothing else: an embedded worker takes an Effect in
// exactly.Config.Effect; a binary of your own passes it to the stock command
// line through package worker.
package effect

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Message is one SQS message as an effect sees it.
type Message struct {
	QueueURL       string
	QueueName      string
	ID             string // SQS MessageId
	Body           string
	Group          string // MessageGroupId; empty on standard queues
	DedupID        string // MessageDeduplicationId; empty on standard queues
	SequenceNumber string // FIFO SequenceNumber; empty on standard queues
	ReceiveCount   int    // ApproximateReceiveCount
	SentAt         time.Time
	// Attributes holds the message attributes of type String and Number.
	Attributes map[string]string
	// AWSTraceHeader is SQS's AWSTraceHeader system attribute (an X-Ray
	// trace header), when the producer's SDK set one.
	AWSTraceHeader string
	// Notification is what SNS said of a message that came through a
	// topic, on a queue declared subscribed (exactly.Config.Subscriptions);
	// nil on any other. On such a queue Body and Attributes are the
	// published message's, unwrapped from SNS's envelope, and Group and
	// DedupID the publisher's (SNS carries them to a FIFO queue).
	Notification *Notification
}

// Notification is the envelope's facts of a message published to an SNS
// topic. With raw message delivery SNS sends no envelope: only TopicARN is
// known (from the configuration).
type Notification struct {
	TopicARN       string
	MessageID      string // SNS's MessageId, the same on every subscribed queue
	SequenceNumber string // the FIFO topic's SequenceNumber
	Subject        string
	Timestamp      time.Time // when SNS took the publication
}

// Input is what an effect is given for one message.
type Input struct {
	Message Message
	// Key is the scoped dedup key: namespace#queue#DedupKey
	// (namespace#queue#group#DedupKey when the queue deduplicates per
	// message group), each part escaped ('%' and '#' as %25 and %23; a
	// part too long or not UTF-8 replaced by its hash). It is the key of
	// the message's dedup record, the dedup_key of the worker's logs and
	// exactly.Done.Key. Pass it downstream as the idempotency key when the
	// downstream is shared by several queues or namespaces: the same
	// DedupKey on two queues is then two operations, as it is to the
	// worker.
	Key string
	// DedupKey is the unscoped key the worker took from the message
	// (Config.KeySource: the idempotency-key attribute, the
	// MessageDeduplicationId, the MessageId, a JSON value of the body):
	// the producer's own key, the same on every queue the message passes
	// through. Pass it downstream instead of Key when the downstream
	// should see the producer's key: one operation that reaches it through
	// two queues (or a queue renamed, or a namespace changed) is then one
	// operation there too.
	DedupKey string
}

// Output is what a successful effect returns.
type Output struct {
	// Result is stored with the dedup record and replayed for duplicates.
	// It is bounded by 16 KiB (idempotency.MaxResultBytes); a larger result
	// is an error.
	Result []byte
	// Writes, when not empty, are committed in one DynamoDB TransactWriteItems
	// together with the COMPLETED dedup record, conditioned on the claim's
	// fencing token (transactional mode). An effect that returns Writes must
	// not have done anything else observable: the writes are the effect.
	// DynamoDB's limits bound the transaction: at most 100 actions (the
	// record, these writes and the outbox items of Send: a head per group
	// and one per message), 400 KB per item, 4 MB in all. A commit past
	// them fails permanently before any request, naming the limit.
	Writes []types.TransactWriteItem
	// Send, when not empty, are messages to publish through the worker's
	// outbox (exactly.Config.Outbox): committed in the same
	// TransactWriteItems as the COMPLETED record, so that they exist if
	// and only if the message counts as done, and published by the relay
	// (worker relay) in order per group. Give each an ID derived from
	// Input.Key (say Key + "/confirmation"): it is the message's dedup key
	// downstream. Without an outbox configured, an effect that returns
	// Send fails permanently.
	Send []Outgoing
}

// Outgoing is a message an effect sends through the worker's outbox: the
// fields, and their limits, of outbox.Message, which the worker converts it
// to (the contract does not depend on the outbox).
type Outgoing struct {
	// QueueURL is the destination queue; or give TopicARN. Exactly one of
	// the two.
	QueueURL string
	// TopicARN is the destination SNS topic, which delivers the message to
	// every queue subscribed to it.
	TopicARN string
	// Group is the MessageGroupId, required for a FIFO queue or topic;
	// messages of one (destination, group) are published in the order they
	// committed.
	Group string
	// Body is the message body: 1 byte to 256 KiB with Attributes.
	Body string
	// Attributes are String message attributes: at most 9.
	Attributes map[string]string
	// ID identifies the message within its group for good (up to 128
	// printable ASCII characters): derive it from Input.Key.
	ID string
}

// Effect is the side effect run once per logical message.
//
// Apply returns nil error on success. To steer a failure, return an error made
// with Permanent or RetryAfter; any other error is retryable with backoff.
type Effect interface {
	Apply(ctx context.Context, in Input) (Output, error)
}

// WritesOnly is an Effect whose whole effect is the DynamoDB writes it
// returns in Output.Writes: Apply changes nothing outside (it may read).
// Declaring it lets the worker commit in optimistic mode, its default for
// such an effect: no claim, and one TransactWriteItems per message that
// puts the dedup record with the writes. Apply may then run for a
// duplicate (its writes are dropped) and more than once for one message
// (its output is used once): that is safe only because it changes nothing
// itself. The command line's built-in ledger and noop effects are WritesOnly.
type WritesOnly interface {
	Effect
	// WritesOnly declares the effect so; it is never called.
	WritesOnly()
}

// CarriesRecord is a WritesOnly effect one of whose writes carries the
// dedup record, so that exactly-once costs no write of its own (the
// worker's carried commit mode, Config.Commit = "carried").
// Output.Writes[Carrier()] must be a Put of an item that exists once per
// logical message (keyed by Input.Key, say a ledger entry "entry#<key>"),
// with a ConditionExpression that holds only while the item is absent
// (attribute_not_exists of its hash key). The commit adds the record's
// attributes (status, token, payload_sha256, created_at, completed_at,
// attempts, message_id, group, result, lease_until) to that item; they are
// reserved names on it. A duplicate is found when that Put fails its
// condition: the item's record tells a duplicate from a conflict. The
// dedup window is the item's lifetime. docs/DESIGN.md states the mode's
// guarantees and limits.
type CarriesRecord interface {
	WritesOnly
	// Carrier is the index in Output.Writes of the Put that carries the
	// record, the same for every message.
	Carrier() int
}

// WritesFunc adapts a function whose whole effect is the writes it returns
// to WritesOnly.
type WritesFunc func(ctx context.Context, in Input) (Output, error)

// Apply calls f.
func (f WritesFunc) Apply(ctx context.Context, in Input) (Output, error) { return f(ctx, in) }

// WritesOnly declares f an effect whose whole effect is its writes.
func (WritesFunc) WritesOnly() {}

// Func adapts a function to Effect.
type Func func(ctx context.Context, in Input) (Output, error)

// Apply calls f.
func (f Func) Apply(ctx context.Context, in Input) (Output, error) { return f(ctx, in) }
