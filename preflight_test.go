package exactly

import (
	"context"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/testenv"
)

type fakeSQS struct{ cmvErr, delErr, sendErr error }

func (f fakeSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, f.sendErr
}

func (f fakeSQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return nil, f.cmvErr
}

func (f fakeSQS) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return nil, f.delErr
}

type deniedDynamo struct{ op string }

func (d deniedDynamo) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.op == "PutItem" {
		return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (d deniedDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.op == "UpdateItem" {
		return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

func TestPreflightNamesTheMissingPermission(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	qs := []pool.Queue{{URL: "https://sqs.eu-west-1.amazonaws.com/1/q.fifo", DLQURL: "https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo"}}
	invalid := &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid"}
	accessDenied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}
	cases := []struct {
		sq   fakeSQS
		db   deniedDynamo
		want string
	}{
		{fakeSQS{accessDenied, invalid, invalid}, deniedDynamo{}, "sqs:ChangeMessageVisibility on https://sqs.eu-west-1.amazonaws.com/1/q.fifo"},
		{fakeSQS{invalid, accessDenied, invalid}, deniedDynamo{}, "sqs:DeleteMessage on https://sqs.eu-west-1.amazonaws.com/1/q.fifo"},
		{fakeSQS{invalid, invalid, accessDenied}, deniedDynamo{}, "sqs:SendMessage (moves to the dead-letter queue) on https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo"},
		{fakeSQS{invalid, invalid, invalid}, deniedDynamo{"PutItem"}, "dynamodb:PutItem on table dedup"},
		{fakeSQS{invalid, invalid, invalid}, deniedDynamo{"UpdateItem"}, "dynamodb:UpdateItem on table dedup"},
	}
	for _, c := range cases {
		err := preflight(context.Background(), log, c.sq, c.db, qs, "dedup")
		var cerr *ConfigError
		require.ErrorAs(t, err, &cerr, c.want)
		require.Contains(t, cerr.Msg, c.want)
	}
	require.NoError(t, preflight(context.Background(), log, fakeSQS{invalid, nil, invalid}, deniedDynamo{}, qs, "dedup"))
}

// TestPreflightWritesNothing runs the probes against the local stack: they
// pass and leave no item behind.
func TestPreflightWritesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db, true)
	sq := testenv.SQS(t)
	url, dlq := testenv.NewQueue(t, sq, true, nil, 3)
	require.NoError(t, preflight(context.Background(), slog.New(slog.DiscardHandler), sq, db, []pool.Queue{{URL: url, DLQURL: dlq}}, table))
	attrs, err := sq.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	require.NoError(t, err)
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessages"], "nothing sent to the DLQ")
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Zero(t, out.Count)
}
