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

// commitOptimisticBench is the worker's default commit (the record and the
// ledger effect's two writes in one TransactWriteItems) over an API that
// accepts every transaction at once: one call is one message's commit.
func commitOptimisticBench(tb testing.TB) func() {
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
	return func() {
		if c, err := st.CommitOptimistic(ctx, req, nil, writes); err != nil || c.Outcome != dedup.Won {
			tb.Fatalf("commit: %v %v", c.Outcome, err)
		}
	}
}

// BenchmarkCommitOptimistic is the ledger's own cost of the worker's
// default commit, requests built and answers read: allocs/op and B/op are
// the ledger's per message.
func BenchmarkCommitOptimistic(b *testing.B) {
	commit := commitOptimisticBench(b)
	b.ReportAllocs()
	for b.Loop() {
		commit()
	}
}

// maxCommitAllocs bounds the allocations of one optimistic commit (15
// measured: the record's map, its values in one block of strings and one
// of numbers, their digits in one string; the condition's values; the
// transaction's items). The claim condition's constant parts and a status
// are the store's, and the condition's now in milliseconds is the record's
// created_at.
const maxCommitAllocs = 15

// TestCommitOptimisticAllocations guards the commit's allocations: each is
// CPU on the hot path and garbage to collect, once per message.
func TestCommitOptimisticAllocations(t *testing.T) {
	commit := commitOptimisticBench(t)
	if n := testing.AllocsPerRun(200, commit); n > maxCommitAllocs {
		t.Fatalf("an optimistic commit allocates %.0f times, more than %d", n, maxCommitAllocs)
	}
}
