package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// BenchmarkCommitOptimistic is the ledger's own cost of the worker's
// default commit (the record and the ledger effect's two writes in one
// TransactWriteItems), requests built and answers read, over an API that
// accepts every transaction at once: allocs/op and B/op are the ledger's
// per message.
func BenchmarkCommitOptimistic(b *testing.B) {
	api := &fakeAPI{TransactWriteItemsFunc: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}}
	st := dedup.NewStore(api, "t")
	writes := []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct#a"}},
			UpdateExpression: aws.String("ADD balance_cents :amt"), ExpressionAttributeValues: map[string]types.AttributeValue{":amt": &types.AttributeValueMemberN{Value: "1"}}}},
		{Put: &types.Put{TableName: aws.String("ledger"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "entry#k"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}
	req := dedup.ClaimRequest{Key: "bench#orders.fifo#k", PayloadSHA256: benchHash, MessageID: "m", Group: "g", Attempts: 1, TTL: time.Hour, Token: "0123456789abcdef0123456789abcdef"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if c, err := st.CommitOptimistic(ctx, req, nil, writes); err != nil || c.Outcome != dedup.Won {
			b.Fatalf("commit: %v %v", c.Outcome, err)
		}
	}
}
