package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/internal/outboxschema"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item is a message as the outbox table holds it.
type Item struct {
	Queue, Group string
	Seq          int64 // its place in its group
	ID, Body     string
	Key          string // what the relay publishes it under (Key)
	Attributes   map[string]string
	Created      time.Time // when its transaction committed
	SentAt       time.Time // zero until published
	Failed       string    // why SQS refused it for good, when it did
	Held         string    // why its group is held at it, while it is
	Dropped      string    // why it had been held, when an operator dropped it
}

func readItem(it map[string]types.AttributeValue) Item {
	x := Item{
		Queue: getS(it, outboxschema.AttrQueue), Group: getS(it, outboxschema.AttrGroup), Seq: getN(it, outboxschema.AttrSK),
		ID: getS(it, outboxschema.AttrID), Body: getS(it, outboxschema.AttrBody), Failed: getS(it, outboxschema.AttrFailed),
		Held: getS(it, outboxschema.AttrHeld), Dropped: getS(it, outboxschema.AttrDropped), Key: cmp.Or(getS(it, outboxschema.AttrKey), getS(it, outboxschema.AttrID)),
		Created: time.UnixMilli(getN(it, outboxschema.AttrCreated)),
	}
	if ms := getN(it, outboxschema.AttrSentAt); ms != 0 {
		x.SentAt = time.UnixMilli(ms)
	}
	if a, ok := it[outboxschema.AttrAttrs].(*types.AttributeValueMemberM); ok {
		x.Attributes = map[string]string{}
		for k, v := range a.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				x.Attributes[k] = s.Value
			}
		}
	}
	return x
}

// ListPending returns up to limit messages not yet published, the oldest
// groups first across the pending index's shards (merged by age), each
// group's in order; and, past limit if need be, the held message of every
// held group not among them: a held group is always listed, however many
// older groups there are. It reads the whole pending index (a Query of
// each shard: one item per pending group) to find them.
func ListPending(ctx context.Context, db API, table string, limit int) ([]Item, error) {
	var heads []head
	for s := range outboxschema.Shards {
		hs, err := pendingHeads(ctx, db, table, s)
		if err != nil {
			return nil, err
		}
		heads = append(heads, hs...)
	}
	slices.SortStableFunc(heads, func(a, b head) int { return cmp.Compare(a.since, b.since) })
	var out []Item
	heldShown := map[string]bool{}
	for _, h := range heads {
		if len(out) >= limit {
			break
		}
		items, err := queryGroup(ctx, db, table, h.pk, h.sent, limit-len(out))
		if err != nil {
			return nil, err
		}
		for _, x := range items {
			if x.SentAt.IsZero() && len(out) < limit {
				out = append(out, x)
				heldShown[h.pk] = heldShown[h.pk] || x.Held != ""
			}
		}
	}
	for _, h := range heads {
		if h.held == "" || heldShown[h.pk] {
			continue
		}
		x, err := getItem(ctx, db, table, h.pk, h.heldSeq)
		if err != nil {
			return nil, err
		}
		if x.Seq == h.heldSeq && x.SentAt.IsZero() {
			out = append(out, x)
		}
	}
	return out, nil
}

// pendingHeads reads one shard of the pending index, oldest group first.
func pendingHeads(ctx context.Context, db API, table string, shard int) ([]head, error) {
	in := &dynamodb.QueryInput{
		TableName: &table, IndexName: aws.String(outboxschema.PendingIndex),
		KeyConditionExpression:    aws.String("#shard = :s"),
		ExpressionAttributeNames:  map[string]string{"#shard": outboxschema.AttrShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(strconv.Itoa(shard))},
	}
	var out []head
	for {
		page, err := db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("outbox: read pending index: %w", err)
		}
		for _, it := range page.Items {
			out = append(out, readHead(it))
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// getItem reads one message of a group (strongly consistent); a zero Item
// when it is not there.
func getItem(ctx context.Context, db API, table, pk string, seq int64) (Item, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(pk), outboxschema.AttrSK: num(seq)},
	})
	if err != nil {
		return Item{}, fmt.Errorf("outbox: read message %d of %s: %w", seq, pk, err)
	}
	return readItem(out.Item), nil
}

// ListGroup returns up to limit of a group's messages still in the table
// (published ones until their TTL): the newest ones, in sequence order.
func ListGroup(ctx context.Context, db API, table, queue, group string, limit int) ([]Item, error) {
	// Newest first, then reversed: a Query answers at most 1 MB a page, so
	// a group of large messages spans pages; the paginator reads on until
	// limit items or the group's end.
	raw, err := queryItems(ctx, db, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :zero"),
		ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(partitionKey(queue, group)), ":zero": num(0)},
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(false),
	}, limit)
	if err != nil {
		return nil, err
	}
	items := make([]Item, 0, len(raw))
	for i := len(raw) - 1; i >= 0; i-- {
		items = append(items, readItem(raw[i]))
	}
	return items, nil
}

func queryGroup(ctx context.Context, db API, table, pk string, after int64, limit int) ([]Item, error) {
	raw, err := queryItems(ctx, db, &dynamodb.QueryInput{
		TableName:                 &table,
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :after"),
		ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":after": num(after)},
		ConsistentRead:            aws.Bool(true),
	}, max(limit, 1))
	if err != nil {
		return nil, err
	}
	items := make([]Item, 0, len(raw))
	for _, it := range raw {
		items = append(items, readItem(it))
	}
	return items, nil
}

// queryItems reads a group's items page by page (a page holds at most
// 1 MB) until it has limit of them or the group ends.
func queryItems(ctx context.Context, db API, in *dynamodb.QueryInput, limit int) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(db, in, func(o *dynamodb.QueryPaginatorOptions) { o.Limit = int32(limit) })
	for p.HasMorePages() && len(out) < limit {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("outbox: read group: %w", err)
		}
		out = append(out, page.Items...)
	}
	return out[:min(len(out), limit)], nil
}
