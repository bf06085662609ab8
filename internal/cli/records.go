package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/operator"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// recordsDB is what the operator commands call on the dedup table.
type recordsDB = operator.RecordsDB

// queueAttrReader reads a queue's attributes (inspect scopes its key as the worker would).
type queueAttrReader = operator.QueueAttrReader

// inspectArgs says which record to show.
type inspectArgs struct {
	table, namespace, key, queue, group string
	messageID, dedupID, idempotencyKey  string
	// dlqSearch bounds the DLQ messages read to tell whether the message
	// is there (0: no search).
	dlqSearch int
}

// scopedKey is operator.ScopedKey, its errors naming the flags.
func (a inspectArgs) scopedKey(ctx context.Context, q queueAttrReader, fs *config.Set) (string, error) {
	key, err := operator.ScopedKey(ctx, q, operator.Lookup{Namespace: a.namespace, Key: a.key, Queue: a.queue, Group: a.group,
		MessageID: a.messageID, DedupID: a.dedupID, IdempotencyKey: a.idempotencyKey})
	switch {
	case errors.Is(err, operator.ErrNoLookup):
		return "", config.Errorf("give %s, or %s with one of --message-id, --dedup-id or --idempotency-key", fs.Name("key"), fs.Name("queue"))
	case errors.Is(err, operator.ErrNoMessage):
		return "", config.Errorf("%s needs one of --message-id, --dedup-id or --idempotency-key", fs.Name("queue"))
	case errors.Is(err, operator.ErrNeedGroup):
		return "", config.Errorf("queue %s deduplicates per message group: give %s", sqsmsg.QueueName(a.queue), fs.Name("group"))
	case err != nil:
		return "", denied(err, "sqs:GetQueueAttributes", a.queue)
	}
	return key, nil
}

func readRecord(ctx context.Context, db recordsDB, table, key string) (*dedup.Record, error) {
	r, err := operator.ReadRecord(ctx, db, table, key)
	if err != nil {
		return nil, denied(err, "dynamodb:GetItem", "table "+table)
	}
	return r, nil
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
	if r.Conflicts > 0 {
		fmt.Fprintf(w, "conflicts:      %d deliveries of another payload, refused\n", r.Conflicts)
		for _, c := range []struct {
			name string
			n    *dedup.ConflictNote
		}{{"first", r.FirstConflict}, {"latest", r.LastConflict}} {
			if c.n != nil {
				fmt.Fprintf(w, "  %-7s       payload_sha256 %s  message %s  at %s\n", c.name+":", c.n.PayloadSHA256, dash(c.n.MessageID), c.n.At.UTC().Format(time.RFC3339Nano))
			}
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// locateActions are the calls inspect's search of the DLQ makes
// (operator.Locate: the queue's and the DLQ's attributes, the DLQ's URL, its
// listing as worker redrive --dry-run makes it). One refused is told in the
// output, not fatal: the record still tells.
var locateActions = []string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility"}

// printWhere says where the message is now (operator.Locate).
func printWhere(w io.Writer, wh operator.Where) {
	fmt.Fprintf(w, "where:          %s\n", wh.Verdict)
	if d := wh.Dead; d != nil {
		fmt.Fprintf(w, "dlq:            %s  message %s  group %s  since %s\n", sqsmsg.QueueName(wh.Queue.DLQURL), d.ID, dash(d.Group), d.SentAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "failure:        %s (at %s)\n", dash(d.Failure), dash(d.FailedAt))
	}
	if q := wh.Queue; q.URL != "" && wh.SearchErr == "" {
		fmt.Fprintf(w, "queue:          %s  %d visible, %d in flight, %d delayed (counts only: SQS has no peek)\n", q.Name, q.Visible, q.InFlight, q.Delayed)
		if wh.DLQSearched {
			more := ""
			if wh.Bounded {
				more = "; its bound: it holds more, read in no set order: raise --dlq-search"
			}
			fmt.Fprintf(w, "dlq searched:   %d messages of %s read (received, made visible again, none deleted%s)\n", wh.Searched, sqsmsg.QueueName(q.DLQURL), more)
		}
	}
	if wh.SearchErr != "" {
		fmt.Fprintf(w, "dlq searched:   no (it needs %s on the queue and its DLQ): %s\n", strings.Join(locateActions, ", "), wh.SearchErr)
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
	fs.Int(&a.dlqSearch, "dlq-search", "", 100, "dead letters to read, at most, to tell whether the message is in its queue's DLQ (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	return inspect(ctx, cl.dynamo, cl.sqs, a, fs, stdout, time.Now())
}

func inspect(ctx context.Context, db recordsDB, q operator.LocateSQS, a inspectArgs, fs *config.Set, stdout io.Writer, now time.Time) error {
	key, err := a.scopedKey(ctx, q, fs)
	if err != nil {
		return err
	}
	r, err := readRecord(ctx, db, a.table, key)
	if err != nil {
		return err
	}
	queue := a.queue
	if queue == "" && a.dlqSearch > 0 {
		// The key names its queue: find it in this account and region.
		if name := operator.KeyQueueName(key); name != "" {
			if out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name}); err == nil {
				queue = aws.ToString(out.QueueUrl)
			}
		}
	}
	wh := operator.Locate(ctx, q, operator.LocateRequest{QueueURL: queue, Key: key, Namespace: a.namespace,
		MessageID: a.messageID, Record: r, Now: now, Max: a.dlqSearch, Wait: time.Second})
	if r == nil && wh.Dead == nil {
		return fmt.Errorf("no record for key %q in table %s: %s", key, a.table, wh.Verdict)
	}
	if r == nil {
		fmt.Fprintf(stdout, "key:            %s\nrecord:         none\n", key)
	} else {
		printRecord(stdout, r, now)
	}
	printWhere(stdout, wh)
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
	defer cl.close()
	return stuck(ctx, cl.dynamo, table, limit, stdout, time.Now())
}

func stuck(ctx context.Context, db recordsDB, table string, limit int, stdout io.Writer, now time.Time) error {
	var recs []*dedup.Record
	var start map[string]ddbtypes.AttributeValue
	for {
		page, err := operator.Stuck(ctx, db, table, now, start, 0)
		if err != nil {
			return denied(err, "dynamodb:Scan", "table "+table)
		}
		recs = append(recs, page.Records...)
		if start = page.Next; start == nil {
			break
		}
	}
	operator.SortStuck(recs)
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
	defer cl.close()
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
	// Deleted only if the record is still the one printed above: a worker
	// that completed it or extended its lease since keeps it.
	if err := operator.Forget(ctx, db, table, r); err != nil {
		var changed *operator.ChangedError
		if errors.As(err, &changed) {
			fmt.Fprintf(stdout, "\nnot deleted: the record changed since it was read; it is now:\n")
			printRecord(stdout, changed.Now, now)
			return fmt.Errorf("%w; run worker forget again to act on the record as it is now", err)
		}
		return denied(err, "dynamodb:DeleteItem", "table "+table)
	}
	fmt.Fprintf(stdout, "deleted %s: its message's next delivery runs the effect again\n", key)
	return nil
}
