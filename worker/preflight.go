package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
)

// preflightSQS and preflightDynamo are the calls preflight makes.
type preflightSQS interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

type preflightDynamo interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// preflightReceipt is no receipt handle SQS ever issued.
const preflightReceipt = "exactly-preflight-not-a-receipt-handle"

// preflight proves at start-up, without side effects, that the worker may
// make the writes it will make: a visibility change and a delete with a
// receipt handle that matches no message (SQS authorizes, then rejects the
// handle), a send of an empty body to the dead-letter queue it moves
// permanent failures to (refused as a missing parameter), and a PutItem and an UpdateItem on the dedup table whose condition
// can never hold (DynamoDB authorizes, then fails the condition: nothing is
// written). Only a permission or credential error fails; anything else is
// the expected rejection. ReceiveMessage cannot be tried without receiving,
// so a missing sqs:ReceiveMessage shows as receive errors in the logs.
func preflight(ctx context.Context, log *slog.Logger, sq preflightSQS, db preflightDynamo, queues []pool.Queue, table string) error {
	for _, q := range queues {
		_, err := sq.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(q.URL), ReceiptHandle: aws.String(preflightReceipt), VisibilityTimeout: 0,
		})
		if err := expected(log, err, "sqs:ChangeMessageVisibility", q.URL); err != nil {
			return err
		}
		_, err = sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.URL), ReceiptHandle: aws.String(preflightReceipt)})
		if err := expected(log, err, "sqs:DeleteMessage", q.URL); err != nil {
			return err
		}
		if q.DLQURL != "" {
			// An empty body is refused after authorization: nothing is sent.
			_, err = sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String("")})
			if err := expected(log, err, "sqs:SendMessage (--move-to-dlq)", q.DLQURL); err != nil {
				return err
			}
		}
	}
	never := aws.String("attribute_exists(#pk) AND attribute_not_exists(#pk)")
	names := map[string]string{"#pk": dedup.AttrPK}
	key := map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "exactly-preflight"}}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: key, ConditionExpression: never, ExpressionAttributeNames: names,
	})
	if err := expected(log, err, "dynamodb:PutItem", "table "+table); err != nil {
		return err
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, ConditionExpression: never,
		ExpressionAttributeNames:  map[string]string{"#pk": dedup.AttrPK, "#st": dedup.AttrStatus},
		UpdateExpression:          aws.String("SET #st = :v"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": &ddbtypes.AttributeValueMemberS{Value: "x"}},
	})
	return expected(log, err, "dynamodb:UpdateItem", "table "+table)
}

// expected passes every outcome of a preflight call but a permission or
// credential error.
func expected(log *slog.Logger, err error, action, resource string) error {
	if err == nil {
		return nil
	}
	if d := denied(err, action, resource); d != err {
		return d
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		log.Debug("preflight call rejected as expected", "action", action, "err", err)
	}
	return nil
}

// queueDLQ is a queue and its redrive policy, as read at start-up.
type queueDLQ struct {
	name           string
	fifo, perGroup bool   // FifoQueue, DeduplicationScope=messageGroup
	redrive        string // RedrivePolicy
}

// dlqScopeSQS is what warnWiderDLQScope calls.
type dlqScopeSQS interface {
	queueURLGetter
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// warnWiderDLQScope warns about FIFO dead-letter queues that deduplicate
// more widely than their queues: a plain FIFO DLQ (DeduplicationScope=queue)
// of a queue deduplicating per message group, and a DLQ shared by several
// queues. There, two distinct messages with one dedup id are one: the
// worker's own moves give each copy a dedup id of its own
// (pool.CopyDeduplicationID), but a copy made by anything else that keeps a
// message's dedup id is silently dropped when the DLQ saw that id within
// five minutes. Best effort: a DLQ that cannot be read is skipped.
func warnWiderDLQScope(ctx context.Context, log *slog.Logger, client dlqScopeSQS, queues []queueDLQ) {
	users := map[string][]string{} // DLQ ARN -> FIFO queues
	var arns []string
	perGroup := map[string][]string{} // DLQ ARN -> queues deduplicating per group
	for _, q := range queues {
		arn, ok := deadLetterARN(q.redrive)
		if !ok || !q.fifo {
			continue
		}
		if _, seen := users[arn]; !seen {
			arns = append(arns, arn)
		}
		users[arn] = append(users[arn], q.name)
		if q.perGroup {
			perGroup[arn] = append(perGroup[arn], q.name)
		}
	}
	for _, arn := range arns {
		dlq := arn[strings.LastIndexByte(arn, ':')+1:]
		if qs := users[arn]; len(qs) > 1 {
			log.Warn("queues share one FIFO dead-letter queue: it deduplicates their messages together, so a copy that keeps a message's dedup id can be dropped there as another queue's duplicate (the worker's own moves give each copy its own id)",
				"dlq", dlq, "queues", strings.Join(qs, ","))
		}
		if len(perGroup[arn]) == 0 {
			continue
		}
		url, err := deadLetterURL(ctx, client, `"deadLetterTargetArn":"`+arn+`"`)
		if err != nil {
			log.Debug("cannot read the dead-letter queue's deduplication scope", "dlq", dlq, "err", err)
			continue
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameDeduplicationScope},
		})
		if err != nil {
			log.Debug("cannot read the dead-letter queue's deduplication scope", "dlq", dlq, "err", err)
			continue
		}
		if scope := out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)]; scope != "messageGroup" {
			log.Warn("dead-letter queue deduplicates more widely than its queue (DeduplicationScope "+orQueue(scope)+" against messageGroup): two messages of two groups with one dedup id are one there, so a copy that keeps a message's dedup id can be dropped (the worker's own moves give each copy its own id); give the DLQ DeduplicationScope=messageGroup (worker setup --high-throughput --dlq does)",
				"dlq", dlq, "queues", strings.Join(perGroup[arn], ","))
		}
	}
}
