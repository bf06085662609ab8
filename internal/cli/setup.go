package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"io"
	"maps"
	"strconv"
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

// setupMaxReceive is --max-receive's default, the queue module's: above a
// Lambda FIFO batch of 10, plus 5 attempts of a message's own (every
// receive counts, a hand-back of a message a batch could not start
// included: docs/DEPLOY.md).
const setupMaxReceive = 15

// setupCommand creates what is missing, idempotently: for local stacks and
// first tries. Terraform (infra/terraform) is the production path.
func setupCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var (
		queue, dlq, table, ledger string
		outboxTable               string
		maxReceive                int
		visibility                time.Duration
		contentDedup, perGroup    bool
	)
	fs := config.NewSet("worker setup", stderr, lookup)
	fs.String(&queue, "queue", "", "", "queue name to create (.fifo makes a FIFO queue)")
	fs.String(&dlq, "dlq", "", "", "dead-letter queue name (FIFO if the queue is)")
	fs.Int(&maxReceive, "max-receive", "", setupMaxReceive, "receives before a message moves to the dead-letter queue (for a FIFO queue behind Lambda, keep it above the batch size)")
	fs.Duration(&visibility, "visibility", "", 30*time.Second, "queue visibility timeout")
	fs.Bool(&contentDedup, "content-based-dedup", "", false, "FIFO: derive the deduplication id from the body")
	fs.Bool(&perGroup, "high-throughput", "", false, "FIFO: DeduplicationScope=messageGroup, FifoThroughputLimit=perMessageGroupId")
	fs.String(&table, "table", "", "", "dedup table name to create (key pk, TTL on expires_at)")
	fs.String(&ledger, "ledger-table", "", "", "ledger table name to create (key pk)")
	fs.String(&outboxTable, "outbox-table", "", "", "outbox table name to create (keys pk, sk; pending index; stream; TTL on ttl)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if queue == "" && table == "" && ledger == "" && outboxTable == "" {
		return config.Errorf("worker setup: nothing to do: give --queue, --table, --ledger-table and/or --outbox-table")
	}
	if (perGroup || contentDedup) && !sqsmsg.IsFIFO(queue) {
		return config.Errorf("--high-throughput and --content-based-dedup are FIFO settings, and queue %q is not FIFO: a FIFO queue's name ends in .fifo", queue)
	}
	if dlq != "" && sqsmsg.IsFIFO(dlq) != sqsmsg.IsFIFO(queue) {
		return config.Errorf("--dlq %s: a FIFO queue needs a FIFO dead-letter queue and a standard one a standard one", dlq)
	}
	if maxReceive < 1 || maxReceive > 1000 {
		return config.Errorf("--max-receive must be between 1 and 1000")
	}
	if visibility < 0 || visibility > 12*time.Hour {
		return config.Errorf("--visibility must be between 0 and 12h")
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	if queue != "" {
		spec := queueSpec{name: queue, dlq: dlq, maxReceive: maxReceive, visibility: visibility, contentDedup: contentDedup, perGroup: perGroup}
		if err := setupQueue(ctx, cl.sqs, stdout, spec); err != nil {
			return err
		}
	}
	if table != "" {
		if err := ensureTable(ctx, cl.dynamo, keyedTable(table), dedup.AttrExpiresAt); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "table %s\n", table)
	}
	if ledger != "" {
		if err := ensureTable(ctx, cl.dynamo, keyedTable(ledger), ""); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ledger-table %s\n", ledger)
	}
	if outboxTable != "" {
		if err := ensureTable(ctx, cl.dynamo, outboxschema.CreateTableInput(outboxTable), outboxschema.AttrTTL); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "outbox-table %s\n", outboxTable)
	}
	return nil
}

// setupSQS is the part of the SQS client setup calls. *sqs.Client and the
// in-memory SQS satisfy it.
type setupSQS interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ setupSQS = (*sqs.Client)(nil)

// queueSpec is what setup makes of --queue and its settings.
type queueSpec struct {
	name, dlq              string
	maxReceive             int
	visibility             time.Duration
	contentDedup, perGroup bool
}

// setupQueue creates (or updates) the queue and its dead-letter queue. The
// DLQ of a high-throughput queue gets its deduplication scope too: a plain
// FIFO DLQ would dedup queue-wide, wider than the queue, so that copies of
// two messages with one dedup id in two groups could not both arrive there.
func setupQueue(ctx context.Context, client setupSQS, stdout io.Writer, q queueSpec) error {
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(int(q.visibility / time.Second))}
	highThroughput := map[string]string{}
	if sqsmsg.IsFIFO(q.name) {
		attrs["FifoQueue"] = "true"
		attrs["ContentBasedDeduplication"] = strconv.FormatBool(q.contentDedup)
		if q.perGroup {
			highThroughput["DeduplicationScope"] = "messageGroup"
			highThroughput["FifoThroughputLimit"] = "perMessageGroupId"
		}
	}
	maps.Copy(attrs, highThroughput)
	if q.dlq != "" {
		dlqAttrs := map[string]string{}
		if sqsmsg.IsFIFO(q.dlq) {
			dlqAttrs["FifoQueue"] = "true"
			maps.Copy(dlqAttrs, highThroughput)
		}
		dlqURL, err := ensureQueue(ctx, client, q.dlq, dlqAttrs)
		if err != nil {
			return err
		}
		arn, err := queueARN(ctx, client, dlqURL)
		if err != nil {
			return err
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, arn, q.maxReceive)
		fmt.Fprintf(stdout, "dlq %s\n", dlqURL)
	}
	url, err := ensureQueue(ctx, client, q.name, attrs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s\n", url)
	return nil
}

// ensureQueue creates the queue, or brings an existing one's attributes in line.
func ensureQueue(ctx context.Context, client setupSQS, name string, attrs map[string]string) (string, error) {
	got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	if err == nil {
		url := aws.ToString(got.QueueUrl)
		settable := map[string]string{}
		for k, v := range attrs {
			if k != "FifoQueue" { // fixed at creation
				settable[k] = v
			}
		}
		if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: settable}); err != nil {
			return "", fmt.Errorf("cannot update queue %s: %w", name, err)
		}
		return url, nil
	}
	var nf *sqstypes.QueueDoesNotExist
	if !errors.As(err, &nf) {
		return "", fmt.Errorf("cannot look up queue %s: %w", name, err)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("cannot create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func queueARN(ctx context.Context, client setupSQS, url string) (string, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("cannot read the ARN of %s: %w", url, err)
	}
	return out.Attributes["QueueArn"], nil
}

// ensureTable creates an on-demand table keyed by pk (S); with ttl, TTL is
// enabled on expires_at.
// keyedTable is a table keyed by pk alone: the dedup and ledger tables.
func keyedTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPK), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(dedup.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}
}

// ensureTable creates the table unless it exists, waits for it, and turns
// TTL on ttlAttr on (none when empty).
func ensureTable(ctx context.Context, db *dynamodb.Client, in *dynamodb.CreateTableInput, ttlAttr string) error {
	name := aws.ToString(in.TableName)
	_, err := db.CreateTable(ctx, in)
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("cannot create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 2*time.Minute); err != nil {
		return fmt.Errorf("table %s did not become active: %w", name, err)
	}
	if ttlAttr == "" {
		return nil
	}
	d, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return fmt.Errorf("cannot describe TTL of %s: %w", name, err)
	}
	if t := d.TimeToLiveDescription; t != nil && aws.ToString(t.AttributeName) == ttlAttr &&
		(t.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || t.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("cannot enable TTL on %s.%s: %w", name, ttlAttr, err)
	}
	return nil
}
