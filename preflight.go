package exactly

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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
			if err := expected(log, err, "sqs:SendMessage (moves to the dead-letter queue)", q.DLQURL); err != nil {
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
	if d := denied(err, action, resource); d != err { //nolint:errorlint // denied returns err itself unless it is an access denial
		return d
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		log.Debug("preflight call rejected as expected", "action", action, "err", err)
	}
	return nil
}
