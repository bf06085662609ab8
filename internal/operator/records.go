// Package operator is what the operator's tools do to the dedup table and
// the queues: find a record the way the worker keys it, list the claims
// whose lease ended, forget a record, describe a queue and a table. The
// commands (worker inspect, stuck, forget) and the console (worker
// console) are two faces of it: neither has logic of its own but how it
// shows the results. The redrive is package redrive's; the outbox's
// operations are package outbox's.
package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// RecordsDB is what the record operations call on the dedup table.
type RecordsDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// QueueAttrReader reads a queue's attributes.
type QueueAttrReader interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Lookup names a record: by its scoped key, or by a message of a queue
// (its idempotency-key attribute, else its dedup id, else its message id:
// the auto key source's order).
type Lookup struct {
	Namespace, Key, Queue, Group       string
	MessageID, DedupID, IdempotencyKey string
}

var (
	// ErrNoLookup: neither a key nor a queue.
	ErrNoLookup = errors.New("give a dedup key, or a queue with a message id, dedup id or idempotency-key")
	// ErrNoMessage: a queue without a message id, dedup id or idempotency-key.
	ErrNoMessage = errors.New("a queue needs a message id, dedup id or idempotency-key")
	// ErrNeedGroup: the queue deduplicates per message group and no group was given.
	ErrNeedGroup = errors.New("the queue deduplicates per message group: give the message's group")
	// ErrNoRecord: no record under the key.
	ErrNoRecord = errors.New("no record")
	// ErrChanged: the record is no longer the one shown (claimed, completed
	// or taken over since), so it was left alone.
	ErrChanged = errors.New("the record changed since it was shown")
)

// ScopedKey is the key the worker would use for the message l names,
// scoped by namespace, queue and, when the queue deduplicates per message
// group, the group (read from the queue's DeduplicationScope).
func ScopedKey(ctx context.Context, q QueueAttrReader, l Lookup) (string, error) {
	if l.Key != "" {
		return l.Key, nil
	}
	if l.Queue == "" {
		return "", ErrNoLookup
	}
	raw := l.IdempotencyKey
	if raw == "" {
		raw = l.DedupID
	}
	if raw == "" {
		raw = l.MessageID
	}
	if raw == "" {
		return "", ErrNoMessage
	}
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &l.Queue, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameDeduplicationScope},
	})
	if err != nil {
		return "", fmt.Errorf("cannot read queue %s: %w", l.Queue, err)
	}
	perGroup := out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)] == "messageGroup"
	if perGroup && l.Group == "" {
		return "", fmt.Errorf("queue %s: %w", sqsmsg.QueueName(l.Queue), ErrNeedGroup)
	}
	return dedup.Scope{Namespace: l.Namespace, Queue: sqsmsg.QueueName(l.Queue), PerGroup: perGroup}.Key(l.Group, raw), nil
}

// ReadRecord reads the record under key (consistently); nil when none.
func ReadRecord(ctx context.Context, db RecordsDB, table, key string) (*dedup.Record, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read record %q: %w", key, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return dedup.DecodeRecord(out.Item)
}

// StuckPage is one Scan page's records: IN_PROGRESS records whose lease
// has ended, oldest lease first (Stuck), or records that met conflicts,
// latest conflict first (Conflicts).
type StuckPage struct {
	Records []*dedup.Record
	Scanned int                                // items the page read (what it cost)
	Next    map[string]ddbtypes.AttributeValue // where the next page starts; nil at the end
}

// Stuck reads one page of a Scan of the table (at most limit items read,
// 0: DynamoDB's 1 MB page) from start (nil: the beginning) and returns its
// IN_PROGRESS records whose lease ended before now and that have not
// expired: claims of workers that died or stalled, which the next
// delivery takes over. The whole list costs a scan of the table.
func Stuck(ctx context.Context, db RecordsDB, table string, now time.Time, start map[string]ddbtypes.AttributeValue, limit int32) (StuckPage, error) {
	p, err := scanRecords(ctx, db, table, start, limit, "#st = :inprog AND #lu < :now_ms AND #exp >= :now_s",
		map[string]string{"#st": dedup.AttrStatus, "#lu": dedup.AttrLeaseUntil, "#exp": dedup.AttrExpiresAt},
		map[string]ddbtypes.AttributeValue{
			":inprog": &ddbtypes.AttributeValueMemberS{Value: dedup.StatusInProgress},
			":now_ms": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())},
			":now_s":  &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(now.Unix())},
		})
	SortStuck(p.Records)
	return p, err
}

// scanRecords reads one page of a Scan of the table (at most limit items
// read, 0: DynamoDB's 1 MB page) from start, keeping the records filter
// matches.
func scanRecords(ctx context.Context, db RecordsDB, table string, start map[string]ddbtypes.AttributeValue, limit int32,
	filter string, names map[string]string, values map[string]ddbtypes.AttributeValue) (StuckPage, error) {
	in := &dynamodb.ScanInput{
		TableName:                 &table,
		ExclusiveStartKey:         start,
		FilterExpression:          aws.String(filter),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	page, err := db.Scan(ctx, in)
	if err != nil {
		return StuckPage{}, fmt.Errorf("cannot scan table %s: %w", table, err)
	}
	p := StuckPage{Scanned: int(page.ScannedCount), Next: page.LastEvaluatedKey}
	for _, it := range page.Items {
		r, err := dedup.DecodeRecord(it)
		if err != nil {
			return StuckPage{}, err
		}
		p.Records = append(p.Records, r)
	}
	return p, nil
}

// SortStuck orders records oldest lease first.
func SortStuck(recs []*dedup.Record) {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].LeaseUntil.Before(recs[j].LeaseUntil) })
}

// Forget deletes the record shown to the operator if it is still exactly
// that record: the same claim token, status and lease (a worker that
// completed it since, under the same token, keeps its COMPLETED record; a
// worker that extended its lease since is alive and keeps its claim; one
// that claimed it since keeps its claim). The only deletion the project
// makes. The next delivery of its message, or a redrive of it, runs the
// effect again. ErrNoRecord when there is none (forgotten already?), a
// *ChangedError (errors.Is ErrChanged) carrying the record as it is now
// when it changed.
func Forget(ctx context.Context, db RecordsDB, table string, shown *dedup.Record) error {
	key := shown.Key
	cond := "attribute_exists(#pk) AND #tok = :tok AND #st = :st AND #lu = :lu"
	if shown.LeaseUntil.UnixMilli() == 0 {
		cond = "attribute_exists(#pk) AND #tok = :tok AND #st = :st AND (attribute_not_exists(#lu) OR #lu = :lu)"
	}
	_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           &table,
		Key:                 map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}},
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{
			"#pk": dedup.AttrPK, "#tok": dedup.AttrToken, "#st": dedup.AttrStatus, "#lu": dedup.AttrLeaseUntil,
		},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":tok": &ddbtypes.AttributeValueMemberS{Value: shown.Token},
			":st":  &ddbtypes.AttributeValueMemberS{Value: shown.Status},
			":lu":  &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(shown.LeaseUntil.UnixMilli())},
		},
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return fmt.Errorf("%w for key %q in table %s (forgotten already, or expired)", ErrNoRecord, key, table)
		}
		now, derr := dedup.DecodeRecord(ccf.Item)
		if derr != nil {
			return fmt.Errorf("%w: key %q; nothing deleted (%w)", ErrChanged, key, derr)
		}
		return &ChangedError{Shown: shown, Now: now}
	}
	if err != nil {
		return fmt.Errorf("cannot delete record %q: %w", key, err)
	}
	return nil
}

// ChangedError is Forget's answer when the record is no longer the one
// shown: nothing was deleted, and Now is the record as it is now (what to
// show the operator before asking again). errors.Is(err, ErrChanged).
type ChangedError struct {
	Shown, Now *dedup.Record
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%v: key %q was %s, claim token %s, lease until %s; it is now %s; nothing deleted",
		ErrChanged, e.Shown.Key, e.Shown.Status, e.Shown.Token, e.Shown.LeaseUntil.UTC().Format(time.RFC3339Nano), DescribeRecord(e.Now))
}

// Is makes errors.Is(err, ErrChanged) true.
func (e *ChangedError) Is(target error) bool { return target == ErrChanged }

// DescribeRecord says in one line what a record is: its status, claim token,
// lease or completion time, and attempts.
func DescribeRecord(r *dedup.Record) string {
	s := fmt.Sprintf("%s, claim token %s", r.Status, r.Token)
	if r.Status == dedup.StatusCompleted && !r.CompletedAt.IsZero() {
		s += ", completed at " + r.CompletedAt.UTC().Format(time.RFC3339Nano)
	} else {
		s += ", lease until " + r.LeaseUntil.UTC().Format(time.RFC3339Nano)
	}
	return s + fmt.Sprintf(", attempts %d", r.Attempts)
}
