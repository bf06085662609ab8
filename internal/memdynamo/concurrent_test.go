package memdynamo_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
)

// TestConcurrentTransactionsStayAtomic: writes parse their requests
// outside the database's lock and evaluate and apply under it. Transfers
// between accounts, each a transaction conditioned on the balances it
// reads, run 32 at a time: no balance goes below zero, the total stays,
// and every transfer that succeeded is in the balances.
func TestConcurrentTransactionsStayAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	const accounts, start = 4, 50
	for i := range accounts {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("acct" + strconv.Itoa(i)), "bal": N(strconv.Itoa(start)), "n": N("0")}})
		require.NoError(t, err)
	}
	var ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 50 {
				from, to := (w+i)%accounts, (w+2*i+1)%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				key := func(a int) V { return V{"pk": S("acct" + strconv.Itoa(a))} }
				_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: &table, Key: key(from), UpdateExpression: aws.String("SET bal = bal - :x, n = n + :one"),
						ConditionExpression: aws.String("bal >= :x"), ExpressionAttributeValues: V{":x": N("7"), ":one": N("1")}}},
					{Update: &types.Update{TableName: &table, Key: key(to), UpdateExpression: aws.String("SET bal = bal + :x, n = n + :one"),
						ExpressionAttributeValues: V{":x": N("7"), ":one": N("1")}}},
				}})
				var tce *types.TransactionCanceledException
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &tce):
					cancelled.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total, touched := 0, 0
	for i := range accounts {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: V{"pk": S("acct" + strconv.Itoa(i))}})
		require.NoError(t, err)
		bal, _ := strconv.Atoi(out.Item["bal"].(*types.AttributeValueMemberN).Value)
		n, _ := strconv.Atoi(out.Item["n"].(*types.AttributeValueMemberN).Value)
		require.GreaterOrEqual(t, bal, 0)
		total += bal
		touched += n
	}
	require.Equal(t, accounts*start, total, "transfers neither create nor lose money")
	require.Equal(t, int(2*ok.Load()), touched, "each transfer that succeeded wrote both of its items, once")
	require.Equal(t, int64(32*50), ok.Load()+cancelled.Load())
	require.Positive(t, cancelled.Load(), "some transfers found too little to move")
}

// TestAWriteToATableDeletedMeanwhileIsNotFound: a write prepared against a
// table that is deleted before it applies finds no table, as a later
// write would.
func TestAWriteToATableDeletedMeanwhileIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memdynamo.New()
	var wg sync.WaitGroup
	for i := range 20 {
		table := newTable(t, db)
		wg.Go(func() {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x" + strconv.Itoa(i))}})
			var nf *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &nf) {
				t.Error(err)
			}
		})
		_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})
		require.NoError(t, err)
	}
	wg.Wait()
}
