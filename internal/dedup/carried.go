package dedup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// carrierReserved are the record's attributes that make an item a record:
// an effect's carrier must not set them itself.
var carrierReserved = []string{AttrStatus, AttrToken, AttrPayloadSHA256, AttrLeaseUntil, AttrCompletedAt, AttrResult}

// CommitCarried is the carried mode's whole commit: no claim, no record item
// of its own. writes[carrier], the carrier, is a Put of an item that exists once
// per logical message, conditioned on its absence; the COMPLETED record's
// attributes (status, token, payload_sha256, created_at, completed_at,
// attempts, message_id, group, result, lease_until; not pk, not expires_at)
// are added to that item, and ALL_OLD asked for. The writes go in one
// TransactWriteItems (a PutItem when the carrier is the only write).
//
// The outcome is a claim's, as in CommitOptimistic: Won when this call
// committed (or, retried with the first try's token, finds its own
// record); Duplicate or Conflict when the carrier's condition failed on an
// item carrying a COMPLETED record, and then nothing was applied. The
// record's Key is req.Key. A carrier that exists without a record (written
// by something else) is an *EffectConditionError on the carrier: a verdict.
// req.TTL and req.Lease are not used: the dedup window is the carrier's
// lifetime.
//
// Errors are CommitOptimistic's; an *EffectConditionError's Index is into
// writes. A malformed carrier is ErrInvalid, before any request.
func (s *Store) CommitCarried(ctx context.Context, req ClaimRequest, result []byte, writes []types.TransactWriteItem, carrier int) (Claim, error) {
	o, items, err := s.prepareCarried(req, result, writes, carrier)
	if err != nil {
		return Claim{}, err
	}
	var put *dynamodb.PutItemInput
	if len(items) == 1 {
		p := items[0].Put
		put = &dynamodb.PutItemInput{
			TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
			ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: p.ReturnValuesOnConditionCheckFailure,
		}
	}
	old, err := s.commitItems(ctx, req.Key, put, items)
	if old == nil {
		var ece *EffectConditionError
		if errors.As(err, &ece) && ece.Index >= carrier {
			ece.Index++ // an index into the other writes: the carrier went first
		}
		if err == nil {
			return o.won, nil
		}
		return Claim{}, err
	}
	if len(old) > 0 && GetS(old, AttrStatus) == "" {
		return Claim{}, &EffectConditionError{Index: carrier, Code: conditionFailedCode,
			Reason: "the carrier item exists and holds no dedup record (written by something else)"}
	}
	c, err := o.judge(old)
	if c.Record != nil {
		c.Record.Key = req.Key
	}
	return c, err
}

// prepareCarried checks a carried commit's arguments and builds its items:
// the carrier first, its item with the record's attributes added (so that
// its cancellation reason comes first, as a record's), then the other
// writes in their order.
func (s *Store) prepareCarried(req ClaimRequest, result []byte, writes []types.TransactWriteItem, carrier int) (*optimistic, []types.TransactWriteItem, error) {
	switch {
	case req.Key == "":
		return nil, nil, errors.New("dedup: empty key")
	case req.PayloadSHA256 == "":
		return nil, nil, errors.New("dedup: commit without a payload hash (conflicts could not be told from duplicates)")
	case len(result) > MaxStoredBytes:
		return nil, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrResultTooLarge, len(result), MaxStoredBytes)
	case carrier < 0 || carrier >= len(writes) || writes[carrier].Put == nil:
		return nil, nil, fmt.Errorf("%w: carried commit of %q: write %d of %d must be a Put of the item that carries the record", ErrInvalid, req.Key, carrier, len(writes))
	case writes[carrier].Put.ConditionExpression == nil || *writes[carrier].Put.ConditionExpression == "":
		return nil, nil, fmt.Errorf("%w: carried commit of %q: the carrier's Put needs a condition that holds only while the item is absent (attribute_not_exists of its key)", ErrInvalid, req.Key)
	}
	for _, a := range carrierReserved {
		if _, ok := writes[carrier].Put.Item[a]; ok {
			return nil, nil, fmt.Errorf("%w: carried commit of %q: the carrier sets %q, a record attribute", ErrInvalid, req.Key, a)
		}
	}
	token, err := tokenOf(req)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	rec := s.recordItem(req, token, StatusCompleted, now, now, now)
	delete(rec, AttrPK)                       // the carrier keeps its own key
	delete(rec, AttrExpiresAt)                // and its own lifetime: the dedup window
	rec[AttrCompletedAt] = rec[AttrCreatedAt] // now
	if len(result) > 0 {
		rec[AttrResult] = &types.AttributeValueMemberB{Value: result}
	}
	put := *writes[carrier].Put
	put.Item = make(map[string]types.AttributeValue, len(put.Item)+len(rec))
	maps.Copy(put.Item, writes[carrier].Put.Item)
	maps.Copy(put.Item, rec)
	put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items := make([]types.TransactWriteItem, 0, len(writes))
	items = append(items, types.TransactWriteItem{Put: &put})
	items = append(items, writes[:carrier]...)
	items = append(items, writes[carrier+1:]...)
	if err := checkSize(req.Key, items); err != nil {
		return nil, nil, err
	}
	req.Token = token
	return &optimistic{
		req: req, now: now,
		won: Claim{Outcome: Won, Key: req.Key, Token: token, LeaseUntil: now, ExpiresAt: time.Time{}},
	}, items, nil
}
