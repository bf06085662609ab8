package memdynamo

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestTokensExpireOldestFirst: a ClientRequestToken is remembered for
// tokenWindow, then forgotten, and what the database keeps of tokens is
// only those of the window: expiry takes the oldest first instead of
// looking at every token on every transaction.
func TestTokensExpireOldestFirst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New()
		_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String("tokens"),
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		})
		require.NoError(t, err)
		put := func(token, pk string) error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: &token, TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("tokens"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}}}})
			return err
		}
		require.NoError(t, put("tok", "a"))
		var mismatch *types.IdempotentParameterMismatchException
		require.ErrorAs(t, put("tok", "b"), &mismatch, "another request under a remembered token")
		for i := range 100 {
			time.Sleep(time.Second)
			require.NoError(t, put(fmt.Sprint("old", i), "x"))
		}
		time.Sleep(tokenWindow + time.Second)
		require.NoError(t, put("tok", "b"), "the token is forgotten after the window")
		db.mu.Lock()
		defer db.mu.Unlock()
		require.Len(t, db.tokens, 1, "only the window's tokens are kept")
		require.Len(t, db.tokenOrder, 1)
	})
}
