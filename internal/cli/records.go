package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// recordsDB is what the operator commands call on the dedup table.
type recordsDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// queueAttrReader reads a queue's attributes (inspect scopes its key as the worker would).
type queueAttrReader interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// inspectArgs says which record to show.
type inspectArgs struct {
	table, namespace, key, queue, group string
	messageID, dedupID, idempotencyKey  string
}

// scopedKey is the key the worker would use for the message named by the
// flags: the idempotency-key attribute, else the dedup id, else the message
// id (the auto key source), scoped by namespace, queue and, when the queue
// deduplicates per message group, the group.
func (a inspectArgs) scopedKey(ctx context.Context, q queueAttrReader, fs *config.Set) (string, error) {
	if a.key != "" {
		return a.key, nil
	}
	if a.queue == "" {
		return "", config.Errorf("give %s, or %s with one of --message-id, --dedup-id or --idempotency-key", fs.Name("key"), fs.Name("queue"))
	}
	raw := a.idempotencyKey
	if raw == "" {
		raw = a.dedupID
	}
	if raw == "" {
		raw = a.messageID
	}
	if raw == "" {
		return "", config.Errorf("%s needs one of --message-id, --dedup-id or --idempotency-key", fs.Name("queue"))
	}
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &a.queue, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameDeduplicationScope},
	})
	if err != nil {
		return "", denied(fmt.Errorf("cannot read queue %s: %w", a.queue, err), "sqs:GetQueueAttributes", a.queue)
	}
	perGroup := out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)] == "messageGroup"
	if perGroup && a.group == "" {
		return "", config.Errorf("queue %s deduplicates per message group: give --group", sqsmsg.QueueName(a.queue))
	}
	return dedup.Scope{Namespace: a.namespace, Queue: sqsmsg.QueueName(a.queue), PerGroup: perGroup}.Key(a.group, raw), nil
}

func readRecord(ctx context.Context, db recordsDB, table, key string) (*dedup.Record, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		return nil, denied(fmt.Errorf("cannot read record %q: %w", key, err), "dynamodb:GetItem", "table "+table)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return dedup.DecodeRecord(out.Item)
}

// printRecord shows a record as an operator reads it.
func printRecord(w io.Writer, r *dedup.Record, now time.Time) {
	fmt.Fprintf(w, "key:            %s\n", r.Key)
	fmt.Fprintf(w, "status:         %s\n", r.Status)
	if r.Status == dedup.StatusInProgress {
		if left := r.LeaseUntil.Sub(now); left > 0 {
			fmt.Fprintf(w, "lease:          %s left (until %s)\n", left.Round(time.Millisecond), r.LeaseUntil.UTC().Format(time.RFC3339Nano))
		} else {
			fmt.Fprintf(w, "lease:          ended %s ago (any worker may take it over)\n", (-left).Round(time.Millisecond))
		}
	}
	fmt.Fprintf(w, "expires:        %s (in %s)\n", r.ExpiresAt.UTC().Format(time.RFC3339), r.ExpiresAt.Sub(now).Round(time.Second))
	fmt.Fprintf(w, "payload_sha256: %s\n", r.PayloadSHA256)
	fmt.Fprintf(w, "message_id:     %s\n", r.MessageID)
	fmt.Fprintf(w, "group:          %s\n", r.Group)
	fmt.Fprintf(w, "attempts:       %d\n", r.Attempts)
	fmt.Fprintf(w, "created:        %s\n", r.CreatedAt.UTC().Format(time.RFC3339Nano))
	if !r.CompletedAt.IsZero() {
		fmt.Fprintf(w, "completed:      %s\n", r.CompletedAt.UTC().Format(time.RFC3339Nano))
	}
	if len(r.Result) > 0 {
		fmt.Fprintf(w, "result:         %s\n", r.Result)
	}
}

func inspectCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var a inspectArgs
	fs := config.NewSet("worker inspect", stderr, lookup)
	fs.String(&a.table, "table", "WORKER_DEDUP_TABLE", DefaultDedupTable, "DynamoDB dedup table")
	fs.String(&a.namespace, "namespace", "WORKER_NAMESPACE", DefaultNamespace, "first part of every dedup key")
	fs.String(&a.key, "key", "", "", "the scoped dedup key, as the worker logs it")
	fs.String(&a.queue, "queue", "", "", "the message's queue URL (the key is scoped as the worker scopes it)")
	fs.String(&a.group, "group", "", "", "the message's group (queues that deduplicate per message group)")
	fs.String(&a.messageID, "message-id", "", "", "the message's MessageId")
	fs.String(&a.dedupID, "dedup-id", "", "", "the message's MessageDeduplicationId")
	fs.String(&a.idempotencyKey, "idempotency-key", "", "", "the message's idempotency-key attribute")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	return inspect(ctx, cl.dynamo, cl.sqs, a, fs, stdout, time.Now())
}

func inspect(ctx context.Context, db recordsDB, q queueAttrReader, a inspectArgs, fs *config.Set, stdout io.Writer, now time.Time) error {
	key, err := a.scopedKey(ctx, q, fs)
	if err != nil {
		return err
	}
	r, err := readRecord(ctx, db, a.table, key)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("no record for key %q in table %s: the message was never claimed, or its record expired", key, a.table)
	}
	printRecord(stdout, r, now)
	return nil
}

// stuck lists IN_PROGRESS records whose lease has ended: claims of workers
// that died or stalled; the next delivery takes each over.
func stuckCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var table string
	var limit int
	fs := config.NewSet("worker stuck", stderr, lookup)
	fs.String(&table, "table", "WORKER_DEDUP_TABLE", DefaultDedupTable, "DynamoDB dedup table")
	fs.Int(&limit, "limit", "", 50, "records to list, oldest lease first (the count covers all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	return stuck(ctx, cl.dynamo, table, limit, stdout, time.Now())
}

func stuck(ctx context.Context, db recordsDB, table string, limit int, stdout io.Writer, now time.Time) error {
	var recs []*dedup.Record
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                &table,
		FilterExpression:         aws.String("#st = :inprog AND #lu < :now_ms AND #exp >= :now_s"),
		ExpressionAttributeNames: map[string]string{"#st": dedup.AttrStatus, "#lu": dedup.AttrLeaseUntil, "#exp": dedup.AttrExpiresAt},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":inprog": &ddbtypes.AttributeValueMemberS{Value: dedup.StatusInProgress},
			":now_ms": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())},
			":now_s":  &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(now.Unix())},
		},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return denied(fmt.Errorf("cannot scan table %s: %w", table, err), "dynamodb:Scan", "table "+table)
		}
		for _, it := range page.Items {
			r, err := dedup.DecodeRecord(it)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].LeaseUntil.Before(recs[j].LeaseUntil) })
	fmt.Fprintf(stdout, "%d IN_PROGRESS records with their lease ended in %s\n", len(recs), table)
	for i, r := range recs {
		if i == limit {
			fmt.Fprintf(stdout, "... and %d more\n", len(recs)-limit)
			break
		}
		fmt.Fprintf(stdout, "%s  lease ended %s ago  attempts %d  message %s  group %s\n",
			r.Key, now.Sub(r.LeaseUntil).Round(time.Second), r.Attempts, r.MessageID, r.Group)
	}
	return nil
}

// errNotConfirmed: forget was not given --yes.
var errNotConfirmed = errors.New("not deleted: add --yes to delete this record")

func forgetCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var table string
	var yes bool
	fs := config.NewSet("worker forget", stderr, lookup)
	fs.String(&table, "table", "WORKER_DEDUP_TABLE", DefaultDedupTable, "DynamoDB dedup table")
	fs.Bool(&yes, "yes", "", false, "delete without asking")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.FlagSet().NArg() != 1 {
		return config.Errorf("worker forget takes one scoped dedup key (worker inspect shows it), then --yes")
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	return forget(ctx, cl.dynamo, table, fs.FlagSet().Arg(0), yes, stdout, time.Now())
}

// forget deletes one record deliberately: the only code path that deletes,
// under a permission of its own (never the worker's role). The next
// delivery of its message, or a redrive of it, runs the effect again.
func forget(ctx context.Context, db recordsDB, table, key string, yes bool, stdout io.Writer, now time.Time) error {
	r, err := readRecord(ctx, db, table, key)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("no record for key %q in table %s", key, table)
	}
	printRecord(stdout, r, now)
	if !yes {
		return errNotConfirmed
	}
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &table,
		Key:       map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}},
		// Only the record just shown: a worker that claimed it meanwhile
		// keeps its claim.
		ConditionExpression:       aws.String("#tok = :tok"),
		ExpressionAttributeNames:  map[string]string{"#tok": dedup.AttrToken},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":tok": &ddbtypes.AttributeValueMemberS{Value: r.Token}},
	})
	if err != nil {
		return denied(fmt.Errorf("cannot delete record %q: %w", key, err), "dynamodb:DeleteItem", "table "+table)
	}
	fmt.Fprintf(stdout, "deleted %s: its message's next delivery runs the effect again\n", key)
	return nil
}
