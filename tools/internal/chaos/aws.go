package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// Produce sends the plan's messages in order, spread evenly over the given
// duration (0: as fast as it can). A batch never holds two messages of one
// group, so an entry that fails is resent before anything after it in its
// group: the group's send order is the plan's. sent counts what was sent.
func Produce(ctx context.Context, c *sqs.Client, url string, sends []Send, over time.Duration, sent *atomic.Int64) error {
	start := time.Now()
	for i := 0; i < len(sends); {
		groups := map[string]bool{}
		j := i
		for j < len(sends) && j-i < 10 && !groups[sends[j].Group] {
			groups[sends[j].Group] = true
			j++
		}
		batch := sends[i:j]
		if over > 0 {
			due := start.Add(time.Duration(float64(over) * float64(i) / float64(len(sends))))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		if err := sendBatch(ctx, c, url, batch); err != nil {
			return err
		}
		sent.Add(int64(len(batch)))
		i = j
	}
	return nil
}

func sendBatch(ctx context.Context, c *sqs.Client, url string, batch []Send) error {
	pending := map[string]Send{}
	for i, s := range batch {
		pending[strconv.Itoa(i)] = s
	}
	for attempt := 1; len(pending) > 0; attempt++ {
		if attempt > 5 {
			return fmt.Errorf("cannot send %d messages after %d attempts", len(pending), attempt-1)
		}
		var entries []sqstypes.SendMessageBatchRequestEntry
		for id, s := range pending {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
				Id: aws.String(id), MessageBody: aws.String(s.Body),
				MessageGroupId: aws.String(s.Group), MessageDeduplicationId: aws.String(s.DedupID),
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{
					dedup.IdempotencyKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(s.Key)},
				},
			})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
			continue
		}
		for _, ok := range out.Successful {
			delete(pending, aws.ToString(ok.Id))
		}
	}
	return nil
}

// Counts reads a queue's approximate counts.
func Counts(ctx context.Context, c *sqs.Client, url string) (QueueCounts, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return QueueCounts{}, fmt.Errorf("cannot read the counts of %s: %w", url, err)
	}
	n := func(k sqstypes.QueueAttributeName) int64 {
		v, _ := strconv.ParseInt(out.Attributes[string(k)], 10, 64)
		return v
	}
	return QueueCounts{
		Visible:  n(sqstypes.QueueAttributeNameApproximateNumberOfMessages),
		InFlight: n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:  n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}, nil
}

// DrainDLQ reads and deletes every message of the dead-letter queue. Reading
// deletes, or a FIFO queue would hold back the rest of a group.
func DrainDLQ(ctx context.Context, c *sqs.Client, url string) ([]DLQMessage, error) {
	var out []DLQMessage
	seen := map[string]bool{}
	empty := 0
	for range 1000 {
		r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return out, fmt.Errorf("cannot read the DLQ: %w", err)
		}
		if len(r.Messages) == 0 {
			if empty++; empty >= 2 {
				return out, nil
			}
			continue
		}
		empty = 0
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range r.Messages {
			id := aws.ToString(m.MessageId)
			if !seen[id] {
				seen[id] = true
				out = append(out, DLQMessage{
					MessageID: id, Body: aws.ToString(m.Body),
					Group:   m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)],
					DedupID: m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)],
				})
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del}); err != nil {
			return out, fmt.Errorf("cannot delete from the DLQ: %w", err)
		}
	}
	return out, errors.New("the DLQ did not run dry after 1000 receives")
}

// scanAll reads a whole table with consistent reads.
func scanAll(ctx context.Context, db *dynamodb.Client, table string) ([]map[string]ddbtypes.AttributeValue, error) {
	var items []map[string]ddbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot scan %s: %w", table, err)
		}
		items = append(items, page.Items...)
	}
	return items, nil
}

// ReadLedger reads the ledger table's accounts and entries.
func ReadLedger(ctx context.Context, db *dynamodb.Client, table string) ([]Account, []Entry, error) {
	items, err := scanAll(ctx, db, table)
	if err != nil {
		return nil, nil, err
	}
	var accts []Account
	var entries []Entry
	for _, it := range items {
		pk := dedup.GetS(it, "pk")
		switch {
		case strings.HasPrefix(pk, "acct#"):
			accts = append(accts, Account{
				Name: strings.TrimPrefix(pk, "acct#"), Balance: dedup.GetN(it, "balance_cents"),
				Applied: dedup.GetN(it, "applied"), LastSeq: dedup.GetN(it, "last_seq"),
			})
		case strings.HasPrefix(pk, "entry#"):
			entries = append(entries, Entry{
				PK: pk, Key: rawKey(pk), Account: dedup.GetS(it, "account"), Group: dedup.GetS(it, "group"),
				Seq: dedup.GetN(it, "seq"), Amount: dedup.GetN(it, "amount_cents"), AppliedAt: dedup.GetN(it, "applied_at"),
				MessageID: dedup.GetS(it, "message_id"),
			})
		}
	}
	return accts, entries, nil
}

// ReadRecords reads the dedup table, by raw key.
func ReadRecords(ctx context.Context, db *dynamodb.Client, table string) (map[string]Record, error) {
	items, err := scanAll(ctx, db, table)
	if err != nil {
		return nil, err
	}
	out := map[string]Record{}
	for _, it := range items {
		out[rawKey(dedup.GetS(it, "pk"))] = Record{Status: dedup.GetS(it, "status"), Attempts: int(dedup.GetN(it, "attempts"))}
	}
	return out, nil
}

// rawKey is the dedup key a scoped key ends with: the harness's keys hold no
// '#', so it is what follows the last one.
func rawKey(pk string) string {
	return pk[strings.LastIndexByte(pk, '#')+1:]
}
