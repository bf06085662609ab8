package outbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What an operator does with a held group (its "held" attribute): the relay holds
// a group at a message SQS refused for a reason its producer could not
// know, and publishes nothing more of it until one of these is called.
// `worker outbox release` and `worker outbox drop` call them.

// ErrNotHeld is returned by Release and Drop when the group is not held
// (or, for Drop, when the held message is not the one named, or the group
// was released since Drop read it).
var ErrNotHeld = errors.New("outbox: not held")

// Held is a held group as its head says.
type Held struct {
	Queue, Group string
	Seq          int64  // the held message's sequence number
	Why          string // SQS's refusal
}

// GroupHeld reports whether a group is held, and at which message and why
// (ok false when it is not).
func GroupHeld(ctx context.Context, db API, table, queue, group string) (h Held, ok bool, err error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: headKey(partitionKey(queue, group)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Held{}, false, fmt.Errorf("outbox: read group %q of %s: %w", group, queue, err)
	}
	hd := readHead(out.Item)
	if out.Item == nil || hd.held == "" {
		return Held{}, false, nil
	}
	return Held{Queue: queue, Group: group, Seq: hd.heldSeq, Why: hd.held}, true, nil
}

// Release lets the relay publish a held group again, from the held message
// as it is: after the cause is gone (the queue's MaximumMessageSize raised
// again, ...). Should SQS refuse it again, the group is held again.
//
// id names the held message the operator saw (as Drop's does): Release is
// refused with ErrNotHeld when the group is no longer held at that message,
// or its hold changed since Release read it. Between an operator's read and
// a confirmation, another operator may have dropped or released the
// message and the relay held the group again, for a reason nobody saw (a
// Reordered break: the consumers may have had messages out of order).
func Release(ctx context.Context, db API, table, queue, group, id string) error {
	h, ok, err := GroupHeld(ctx, db, table, queue, group)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: group %q of %s", ErrNotHeld, group, queue)
	}
	pk := partitionKey(queue, group)
	// held_seq stays: the relay publishes the released message alone (see
	// outboxschema.AttrHeldSeq). After a Reordered hold, SQS's number of
	// the group's last message goes: the messages SQS took out of order,
	// the break the operator saw, would otherwise hold the group again.
	upd := "REMOVE #held"
	names := map[string]string{"#held": outboxschema.AttrHeld, "#hseq": outboxschema.AttrHeldSeq}
	if strings.HasPrefix(h.Why, ReorderedHold) {
		upd += ", #sqsseq"
		names["#sqsseq"] = outboxschema.AttrSQSSeq
	}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: &table, Key: headKey(pk),
			UpdateExpression:          aws.String(upd),
			ConditionExpression:       aws.String("#held = :why AND #hseq = :hseq"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":hseq": num(h.Seq), ":why": str(h.Why)},
		}},
		{Update: &types.Update{
			TableName: &table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(pk), outboxschema.AttrSK: num(h.Seq)},
			UpdateExpression:          aws.String("REMOVE #held"),
			ConditionExpression:       aws.String("#id = :id"),
			ExpressionAttributeNames:  map[string]string{"#held": outboxschema.AttrHeld, "#id": outboxschema.AttrID},
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id)},
		}},
	}})
	if err := heldRefusal(err, group, queue, h.Seq, id); err != nil {
		return fmt.Errorf("outbox: release group %q of %s: %w", group, queue, err)
	}
	return nil
}

// heldRefusal reads the answer of an operator's transaction on a held group
// (the head's condition first, the held message's second): a condition that
// failed is ErrNotHeld, saying which.
func heldRefusal(err error, group, queue string, seq int64, id string) error {
	var tce *types.TransactionCanceledException
	if err == nil || !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 {
		return err
	}
	switch {
	case aws.ToString(tce.CancellationReasons[1].Code) == "ConditionalCheckFailed":
		return fmt.Errorf("%w: the held message of group %q of %s is number %d, whose id is not %q", ErrNotHeld, group, queue, seq, id)
	case aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed":
		return fmt.Errorf("%w: group %q of %s was released or held again since it was read", ErrNotHeld, group, queue)
	}
	return err
}

// Drop skips a held group's held message, whose ID the operator names (a
// guard against dropping another): it is marked dropped (attribute "dropped", with
// why it was held, and "sent_at" and a TTL of DefaultRetention like a
// published one) and the relay publishes the rest of the group. The
// message is never published: whatever it announced, the operator
// handles.
func Drop(ctx context.Context, db API, table, queue, group, id string) error {
	pk := partitionKey(queue, group)
	var first head
	for attempt := 0; ; attempt++ {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: headKey(pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("outbox: read group %q of %s: %w", group, queue, err)
		}
		h := readHead(out.Item)
		if out.Item == nil || h.held == "" {
			return fmt.Errorf("%w: group %q of %s", ErrNotHeld, group, queue)
		}
		if attempt == 0 {
			first = h
		} else if h.held != first.held || h.heldSeq != first.heldSeq {
			// Released (and perhaps held again) since the first read: the
			// hold the operator meant is gone, and its message may have
			// been published.
			return fmt.Errorf("%w: group %q of %s was released since it was read", ErrNotHeld, group, queue)
		}
		now := time.Now()
		// SQS's number of the group's last message goes with the hold:
		// the messages after the dropped one that SQS took before the
		// last one recorded (a Reordered hold's break, which the operator
		// saw) would otherwise hold the group again.
		headUpd := "SET #sent = :k REMOVE #held, #hseq, #sqsseq"
		// Conditioned on the hold read, not only its message: a Release
		// keeps held_seq, and a Drop after it would mark a message the
		// relay may have published as never published, its mark going
		// back.
		cond := "#held = :why AND #hseq = :k AND #seq = :seq"
		names := map[string]string{"#sent": outboxschema.AttrSent, "#held": outboxschema.AttrHeld, "#hseq": outboxschema.AttrHeldSeq, "#seq": outboxschema.AttrSeq, "#sqsseq": outboxschema.AttrSQSSeq}
		values := map[string]types.AttributeValue{":why": str(h.held), ":k": num(h.heldSeq), ":seq": num(h.seq)}
		if h.seq == h.heldSeq {
			headUpd += ", #shard, #since" // nothing left: the group leaves the pending index
			names["#shard"], names["#since"] = outboxschema.AttrShard, outboxschema.AttrSince
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName: &table, Key: headKey(pk), UpdateExpression: aws.String(headUpd), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			}},
			{Update: &types.Update{
				TableName: &table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(pk), outboxschema.AttrSK: num(h.heldSeq)},
				UpdateExpression:         aws.String("SET #dropped = :why, #at = :now, #ttl = :ttl REMOVE #held"),
				ConditionExpression:      aws.String("#id = :id"),
				ExpressionAttributeNames: map[string]string{"#dropped": outboxschema.AttrDropped, "#at": outboxschema.AttrSentAt, "#ttl": outboxschema.AttrTTL, "#held": outboxschema.AttrHeld, "#id": outboxschema.AttrID},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":why": str(h.held), ":now": num(now.UnixMilli()), ":ttl": num(now.Add(DefaultRetention).Unix()), ":id": str(id),
				},
			}},
		}})
		if err == nil {
			return nil
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) && len(tce.CancellationReasons) == 2 && attempt < 3 &&
			aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" && aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" {
			continue // a message was added, or the group released: read again (a release is refused)
		}
		return fmt.Errorf("outbox: drop message %q of group %q of %s: %w", id, group, queue, heldRefusal(err, group, queue, h.heldSeq, id))
	}
}
