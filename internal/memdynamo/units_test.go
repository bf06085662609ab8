package memdynamo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
)

// TestWriteUnits: write units as DynamoDB bills them: the larger of the
// item before and after, per started KB, at least 1; twice in a
// transaction; a failed single write's condition still costs.
func TestWriteUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	step := func(want int, what string, f func() error) {
		t.Helper()
		before := db.WriteUnits()
		_ = f()
		require.Equal(t, want, db.WriteUnits()-before, what)
	}
	put := func(pk string, size int, cond string) func() error {
		return func() error {
			in := &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S(pk), "v": S(strings.Repeat("x", size))}}
			if cond != "" {
				in.ConditionExpression = aws.String(cond)
			}
			_, err := db.PutItem(ctx, in)
			return err
		}
	}
	step(1, "a small put", put("a", 10, ""))
	step(2, "1,500 bytes", put("b", 1500, ""))
	step(2, "a small put over a large item: its size before", put("b", 10, ""))
	step(1, "a failed condition on a small item", put("a", 3000, "attribute_not_exists(pk)"))
	step(1, "a small update", func() error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("a")},
			UpdateExpression: aws.String("SET n = :one"), ExpressionAttributeValues: V{":one": N("1")}})
		return err
	})
	step(4, "a transaction of two small items", func() error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: V{"pk": S("c")}}},
			{Update: &types.Update{TableName: &table, Key: V{"pk": S("a")}, UpdateExpression: aws.String("SET n = :two"), ExpressionAttributeValues: V{":two": N("2")}}},
		}})
		return err
	})
	step(1, "a delete", func() error {
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: V{"pk": S("c")}})
		return err
	})
}
