package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CommitOptimistic is the optimistic mode's whole commit: with no claim
// before it, one request puts req's record COMPLETED, with result, on the
// claim's own condition (the key absent, expired, or IN_PROGRESS with its
// lease ended), together with the effect's writes in one TransactWriteItems
// (a PutItem when there are none). Either the record and every write commit,
// or nothing does.
//
// The outcome is a claim's: Won when this call committed; Duplicate,
// Conflict or Busy, read from the record that failed the condition (ALL_OLD,
// at no extra cost), when it did not, and then nothing was applied. A call
// retried after a lost response must pass the first try's token
// (req.Token): the record it finds COMPLETED under that token is its own
// commit, Won. req.Lease is not used.
//
// Errors: *EffectConditionError (one of the writes failed its own
// condition) and ErrInvalid are verdicts; ErrResultTooLarge and
// ErrTooLarge (also ErrInvalid) are returned before any request; any other error (TransactionConflict, throttling, a
// timeout) is no verdict and may be retried with the same token.
func (s *Store) CommitOptimistic(ctx context.Context, req ClaimRequest, result []byte, writes []types.TransactWriteItem) (Claim, error) {
	o, err := s.prepareOptimistic(req, result, writes)
	if err != nil {
		return Claim{}, err
	}
	var put *dynamodb.PutItemInput
	if len(writes) == 0 {
		put = o.putInput()
	}
	old, err := s.commitItems(ctx, req.Key, put, o.items)
	if old == nil {
		if err == nil {
			return o.won, nil
		}
		return Claim{}, err
	}
	return o.judge(old)
}

// commitItems sends a commit: put alone when set, else items in one
// TransactWriteItems (the record's item first). It returns nil, nil when
// it committed; the item that failed the record's condition (ALL_OLD;
// empty, not nil, when none came back); or nil and the error (a verdict on
// the other items, or none).
func (s *Store) commitItems(ctx context.Context, key string, put *dynamodb.PutItemInput, items []types.TransactWriteItem) (map[string]types.AttributeValue, error) {
	if put != nil {
		_, err := s.db.PutItem(ctx, put)
		if err == nil {
			return nil, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, commitError(key, err)
		}
		if ccf.Item == nil {
			return map[string]types.AttributeValue{}, nil
		}
		return ccf.Item, nil
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil, nil
	}
	return cancelled(key, len(items), err)
}

// optimistic is one optimistic commit, ready to go.
type optimistic struct {
	req   ClaimRequest
	now   time.Time
	won   Claim
	items []types.TransactWriteItem // the record's Put (on the claim's condition), then the writes
}

// putInput is the record's Put as a PutItem, for a commit without writes.
func (o *optimistic) putInput() *dynamodb.PutItemInput {
	p := o.items[0].Put
	return &dynamodb.PutItemInput{
		TableName:                           p.TableName,
		Item:                                p.Item,
		ConditionExpression:                 p.ConditionExpression,
		ExpressionAttributeNames:            p.ExpressionAttributeNames,
		ExpressionAttributeValues:           p.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// prepareOptimistic checks an optimistic commit's arguments and builds its
// requests.
func (s *Store) prepareOptimistic(req ClaimRequest, result []byte, writes []types.TransactWriteItem) (optimistic, error) {
	switch {
	case req.Key == "":
		return optimistic{}, errors.New("dedup: empty key")
	case req.TTL <= 0:
		return optimistic{}, fmt.Errorf("dedup: ttl (%s) must be positive", req.TTL)
	case req.PayloadSHA256 == "":
		return optimistic{}, errors.New("dedup: commit without a payload hash (conflicts could not be told from duplicates)")
	case len(result) > MaxStoredBytes:
		return optimistic{}, fmt.Errorf("%w: %d bytes, more than %d", ErrResultTooLarge, len(result), MaxStoredBytes)
	}
	token, err := tokenOf(req)
	if err != nil {
		return optimistic{}, err
	}
	now := s.now()
	expiresAt := expiry(now.Add(req.TTL), now)
	// The lease ends as it starts: a COMPLETED record has none.
	item := s.recordItem(req, token, StatusCompleted, now, now, expiresAt)
	item[AttrCompletedAt] = item[AttrCreatedAt] // now
	if len(result) > 0 {
		item[AttrResult] = &types.AttributeValueMemberB{Value: result}
	}
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 s.claimCond,
		ExpressionAttributeNames:            s.claimNames,
		ExpressionAttributeValues:           s.claimValues(item, now),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	items = append(items, writes...)
	if err := checkSize(req.Key, items); err != nil {
		return optimistic{}, err
	}
	req.Token = token
	return optimistic{
		req: req, now: now, items: items,
		won: Claim{Outcome: Won, Key: req.Key, Token: token, LeaseUntil: now, ExpiresAt: expiresAt},
	}, nil
}

// judge tells what the record that failed the commit's condition means:
// our own commit (its response lost: Won), or a duplicate, a conflict, a
// live claim.
func (o *optimistic) judge(old map[string]types.AttributeValue) (Claim, error) {
	if len(old) == 0 {
		// The condition can only fail on an existing item; without it we
		// cannot tell a duplicate from a live claim: no verdict.
		return Claim{}, fmt.Errorf("dedup: commit of %q failed its condition but returned no item", o.req.Key)
	}
	rec, err := DecodeRecord(old)
	if err != nil {
		return Claim{}, err
	}
	if rec.Token == o.req.Token {
		// Our own commit, whose response was lost: the retry found it.
		if rec.Status != StatusCompleted {
			return Claim{}, fmt.Errorf("dedup: commit of %q: record under this commit's token is %s", o.req.Key, rec.Status)
		}
		won := o.won
		won.LeaseUntil, won.ExpiresAt = rec.LeaseUntil, rec.ExpiresAt
		return won, nil
	}
	return blocked(o.req, rec, o.now), nil
}
