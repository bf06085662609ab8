// Package outboxschema is the format of the outbox table: its attributes,
// its pending index and the table `worker setup --outbox-table` creates.
// Package outbox writes and relays in it; the Terraform module and the
// command line are held to it. It is a contract with data already in
// tables, kept out of the public API.
package outboxschema

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The outbox table. One partition per (queue, message group): its head item
// (sort key 0) counts the group's messages and says how far the relay has
// published them; its message items (sort keys 1, 2, ...) are the messages
// in the order their transactions committed. A sparse global secondary index
// holds the heads of the groups with messages to publish.
const (
	// AttrPK is the partition key (S): the queue URL, '#', the group.
	AttrPK = "pk"
	// AttrSK is the sort key (N): 0 for the head, the message's sequence
	// number in its group otherwise.
	AttrSK = "sk"
	// AttrTTL (N, epoch seconds) is set on a message item once it is
	// published; DynamoDB's TTL deletes it after the retention. An item
	// not yet published never has one.
	AttrTTL = "ttl"

	// AttrQueue (S) and AttrGroup (S) are on every item.
	AttrQueue = "queue"
	AttrGroup = "group"

	// Head attributes.
	AttrSeq  = "seq"  // N: the last sequence number given out
	AttrSent = "sent" // N: the last sequence number published
	// AttrShard (S) is present only while the group has messages to
	// publish: the hash key of PendingIndex.
	AttrShard = "pshard"
	// AttrSince (N, epoch ms) is present only with AttrShard: when the
	// oldest message still to publish was committed. The range key of
	// PendingIndex; now minus the smallest is the relay's lag.
	AttrSince = "since"

	// AttrHeld (S) is set, on the head and on the message, while the relay
	// holds a group at a message SQS refused for a reason the producer
	// could not know (the queue's MaximumMessageSize lowered under it, ...):
	// why. Nothing more of the group is published until an operator
	// releases it (Release) or drops the message (Drop).
	AttrHeld = "held"
	// AttrHeldSeq (N) is set on a held group's head: the held message's
	// sequence number. Release leaves it, so that the relay publishes the
	// released message alone in its SendMessageBatch (Relay.GroupBatch):
	// SQS's answer to the copies of later messages it took before a
	// reorder cannot then be taken for a second reorder.
	AttrHeldSeq = "held_seq"
	// AttrSQSSeq (S) is on a FIFO group's head once the relay has
	// recorded a message of it published: SQS's sequence number of the
	// last message recorded published, written in the transaction that
	// moves AttrSent (so two relays cannot both advance it). A later
	// message SQS answers with a lower number (a deduplicated copy is
	// answered with its first copy's number) was had by SQS before an
	// earlier one: a relay with GroupBatch above 1 holds the group.
	// Release of a Reordered hold and Drop remove it: the break the
	// operator saw would otherwise be held again. A head written before it
	// existed has none: no check until a message is recorded.
	AttrSQSSeq = "sqs_seq"
	// AttrDropped (S) is set, with AttrSentAt, on a message an operator
	// dropped from its held group: why it had been held.
	AttrDropped = "dropped"
	// AttrFailed (S) is set, with AttrSentAt, on a message SQS refused for
	// good for what the message itself holds: why. The relay moves past
	// it. Any other refusal holds the group (AttrHeld).
	AttrFailed = "failed"

	// Message item attributes.
	AttrID      = "id"      // S: the message id
	AttrKey     = "key"     // S: Key(group, id), its MessageDeduplicationId and idempotency-key (the id on items written before it existed)
	AttrBody    = "body"    // S
	AttrAttrs   = "attrs"   // M of S: message attributes (String)
	AttrCreated = "created" // N, epoch ms: when the producer committed it
	AttrSentAt  = "sent_at" // N, epoch ms: when the relay published it

	// PendingIndex is the sparse global secondary index of the groups with
	// messages to publish: hash AttrShard, range AttrSince, all attributes
	// projected.
	PendingIndex = "pending"
	// Shards is how many AttrShard values there are ("0" .. "7"): a group's
	// is a hash of its partition key. Writers and relays must agree on it,
	// so it is part of the table's format, not a setting.
	Shards = 8
)

// CreateTableInput is the outbox table as `worker setup --outbox-table`
// creates it (on-demand, stream of keys on): what the Terraform module
// infra/terraform/modules/outbox-table declares too. TTL on AttrTTL is set
// separately (UpdateTimeToLive).
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(AttrShard), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSince), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(PendingIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrSince), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly},
	}
}
