package exactlytest

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/outbox"
)

// SQS is an in-memory SQS: standard and FIFO queues, message groups,
// deduplication per queue or per message group, visibility timeouts,
// receive counts and redrive policies, and SQS's documented limits. It has
// the methods of *sqs.Client that exactly's Worker, its Lambda handler and
// the outbox relay call, with the same inputs and outputs, so it goes where
// a client goes: exactly.Config.SQS, outbox.Relay.SQS. The project's own
// tests use it, held to the SQS emulators by a shared contract suite. Make
// one with NewSQS and its queues with NewQueue. It is safe for concurrent
// use.
type SQS struct {
	s *memsqs.Server
}

// NewSQS returns an in-memory SQS with no queues.
func NewSQS() *SQS { return &SQS{s: memsqs.New()} }

// DynamoDB is an in-memory DynamoDB: the item, table and query operations
// the worker, the ledger, the outbox and common effects use, with
// DynamoDB's condition and update expressions, transactions and their
// cancellation reasons, ReturnValuesOnConditionCheckFailure, and its
// documented limits (item size, transaction size, key sizes, pages). What
// it does not model fails with an error rather than being guessed. It has
// the methods of *dynamodb.Client with the same inputs and outputs, so it
// goes where a client goes: exactly.Config.DynamoDB, idempotency.Config,
// outbox.New. The project's own tests use it, held to DynamoDB Local by a
// shared contract suite. Make one with NewDynamoDB. It is safe for
// concurrent use.
type DynamoDB struct {
	db *memdynamo.DB
}

// NewEmptyDynamoDB returns an in-memory DynamoDB with no table, for code
// outside a test (an example, a demo) or one that makes its own tables with
// CreateTable (outbox.CreateTableInput describes the outbox's). NewDynamoDB
// returns one that holds the dedup table already.
func NewEmptyDynamoDB() *DynamoDB { return &DynamoDB{db: memdynamo.New()} }

// Calls returns how many requests of each operation ("PutItem",
// "TransactWriteItems", ...) it has served, failed ones included: what an
// effect or a worker costs in requests.
func (d *DynamoDB) Calls() map[string]int { return d.db.Calls() }

// WriteUnits returns the write capacity units consumed so far, as DynamoDB
// bills them: per item written, the larger of its size before and after,
// rounded up to 1 KB (at least 1), twice that inside TransactWriteItems; a
// single write whose condition fails consumes the same. What an effect or
// a commit mode costs in write units.
func (d *DynamoDB) WriteUnits() int { return d.db.WriteUnits() }

// Swept is an item SweepExpired deleted: its table, the item as it was, and
// the time its TTL attribute named.
type Swept struct {
	Table     string
	Item      map[string]types.AttributeValue
	ExpiresAt time.Time
}

// SweepExpired does what DynamoDB's TTL does at some time after an item
// expires, when a test says so: it deletes, in every table whose TTL is
// enabled, the items whose TTL attribute is a number of epoch seconds before
// now (and not more than five years before it, which DynamoDB leaves alone)
// and for which isDue says their time has come (DynamoDB promises no time:
// within days of expiry). Until then an expired item stays, readable, as on
// DynamoDB. It returns the items deleted, in an order fixed by their tables
// and keys; the deletes cost no calls or write units, as DynamoDB's own do
// not. With it a test can show what an effect or a worker does when a
// record disappears under it.
func (d *DynamoDB) SweepExpired(now time.Time, isDue func(table string, key map[string]types.AttributeValue, expiresAt time.Time) bool) []Swept {
	var out []Swept
	for _, s := range d.db.SweepExpired(now, isDue) {
		out = append(out, Swept{Table: s.Table, Item: s.Item, ExpiresAt: s.ExpiresAt})
	}
	return out
}

var (
	_ exactly.SQS      = (*SQS)(nil)
	_ outbox.SQS       = (*SQS)(nil)
	_ exactly.DynamoDB = (*DynamoDB)(nil)
	_ outbox.API       = (*DynamoDB)(nil)
)

// CreateQueue creates a queue, or returns the URL of an existing one with the same attributes.
func (q *SQS) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	return q.s.CreateQueue(ctx, in, optFns...)
}

// GetQueueUrl returns the URL of a queue by name.
func (q *SQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	return q.s.GetQueueUrl(ctx, in, optFns...)
}

// DeleteQueue deletes a queue and its messages.
func (q *SQS) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	return q.s.DeleteQueue(ctx, in, optFns...)
}

// GetQueueAttributes returns the requested attributes ("All" for all).
func (q *SQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return q.s.GetQueueAttributes(ctx, in, optFns...)
}

// SetQueueAttributes changes the settable attributes of a queue.
func (q *SQS) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	return q.s.SetQueueAttributes(ctx, in, optFns...)
}

// SendMessage sends one message.
func (q *SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return q.s.SendMessage(ctx, in, optFns...)
}

// SendMessageBatch sends up to 10 messages; invalid entries fail one by one.
func (q *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return q.s.SendMessageBatch(ctx, in, optFns...)
}

// ReceiveMessage receives up to MaxNumberOfMessages messages, long-polling for up to WaitTimeSeconds (on the test's clock: under testing/synctest a long poll costs no wall time).
func (q *SQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return q.s.ReceiveMessage(ctx, in, optFns...)
}

// DeleteMessage deletes one message by receipt handle.
func (q *SQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return q.s.DeleteMessage(ctx, in, optFns...)
}

// DeleteMessageBatch deletes up to 10 messages; entries fail one by one.
func (q *SQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return q.s.DeleteMessageBatch(ctx, in, optFns...)
}

// ChangeMessageVisibility changes the visibility timeout of one in-flight message.
func (q *SQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return q.s.ChangeMessageVisibility(ctx, in, optFns...)
}

// ChangeMessageVisibilityBatch changes up to 10 visibility timeouts; entries fail one by one.
func (q *SQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return q.s.ChangeMessageVisibilityBatch(ctx, in, optFns...)
}

// PurgeQueue deletes every message of a queue.
func (q *SQS) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	return q.s.PurgeQueue(ctx, in, optFns...)
}

// CreateTable creates a table: a hash key (and a range key), global secondary indexes, a stream specification.
func (d *DynamoDB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return d.db.CreateTable(ctx, in, optFns...)
}

// DeleteTable deletes a table and its items.
func (d *DynamoDB) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return d.db.DeleteTable(ctx, in, optFns...)
}

// DescribeTable describes a table: its keys, indexes and status.
func (d *DynamoDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return d.db.DescribeTable(ctx, in, optFns...)
}

// UpdateTimeToLive turns the table's TTL on or off. No item is ever swept:
// like DynamoDB before its TTL sweep, expired records stay readable.
func (d *DynamoDB) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return d.db.UpdateTimeToLive(ctx, in, optFns...)
}

// DescribeTimeToLive returns the table's TTL setting.
func (d *DynamoDB) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return d.db.DescribeTimeToLive(ctx, in, optFns...)
}

// PutItem writes an item, with a condition expression and ReturnValuesOnConditionCheckFailure.
func (d *DynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return d.db.PutItem(ctx, in, optFns...)
}

// UpdateItem updates an item with an update expression, with a condition expression.
func (d *DynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return d.db.UpdateItem(ctx, in, optFns...)
}

// DeleteItem deletes an item, with a condition expression.
func (d *DynamoDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return d.db.DeleteItem(ctx, in, optFns...)
}

// GetItem reads an item (always strongly consistent).
func (d *DynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return d.db.GetItem(ctx, in, optFns...)
}

// TransactWriteItems applies up to 100 puts, updates, deletes and condition checks atomically, or none, with DynamoDB's cancellation reasons.
func (d *DynamoDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return d.db.TransactWriteItems(ctx, in, optFns...)
}

// Query reads a table or a global secondary index by key condition, in pages of at most 1 MB.
func (d *DynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return d.db.Query(ctx, in, optFns...)
}

// Scan reads a table page by page (Limit items read, or 1 MB, per page), as
// DynamoDB does, with FilterExpression and ProjectionExpression; indexes and
// parallel segments are not supported.
func (d *DynamoDB) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return d.db.Scan(ctx, in, optFns...)
}

// BatchGetItem reads up to 100 items across tables; past 16 MB of answer the rest come back in UnprocessedKeys.
func (d *DynamoDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return d.db.BatchGetItem(ctx, in, optFns...)
}
