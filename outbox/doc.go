// Package outbox is the producer half of exactly-once: a transactional
// outbox in DynamoDB and the relay that publishes it to SQS.
//
// A producer commits its own DynamoDB writes and the messages they announce
// in one TransactWriteItems (Outbox.Write), so that a crash can never leave
// a change without its message or a message without its change. The relay
// (Relay) publishes each message group's messages in the order their
// transactions committed, at least once, every copy with the same
// MessageDeduplicationId and idempotency-key attribute (Key: the group and
// the message id):
// SQS drops resends inside its five-minute window and the consumer's dedup
// ledger absorbs the rest.
//
//	ob := outbox.New(dynamodbClient, "exactly-outbox")
//	err := ob.Write(ctx, []outbox.Message{{
//		QueueURL: ordersQueue, Group: "customer-42", ID: "order-1001/created",
//		Body: `{"order":"1001"}`,
//	}}, yourOwnWrites...) // your Put/Update/ConditionCheck items, on any table
//
// The package's runnable examples (Outbox.Write, Relay.Sweep) use the test
// kit's in-memory DynamoDB and SQS (package exactlytest).
package outbox
