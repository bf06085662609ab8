package memdynamo_test

// DynamoDB's documented limits, at and just past each: the same cases run
// against memdynamo and DynamoDB Local, which enforces each of them the
// same way (checked with EXACTLY_REQUIRE_INTEGRATION=1). Sources: "Constraints in Amazon
// DynamoDB" (developerguide/Constraints.html), "DynamoDB item sizes and
// formats" (developerguide/CapacityUnitCalculations.html) and each
// operation's API Reference page.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// newRangeTable makes a table keyed (pk of pkType, sk S).
func newRangeTable(t *testing.T, db DB, pkType types.ScalarAttributeType) string {
	t.Helper()
	return createTable(t, db, "ml", &dynamodb.CreateTableInput{
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: pkType},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
	})
}

// createTable creates in's table, on demand, under a unique name with
// prefix, dropped when the test ends.
func createTable(t *testing.T, db DB, prefix string, in *dynamodb.CreateTableInput) string {
	t.Helper()
	name := testenv.Name(prefix)
	in.TableName, in.BillingMode = &name, types.BillingModePayPerRequest
	_, err := db.CreateTable(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return name
}

// TestItemSizeLimit: an item of exactly 400 KB is taken, one byte more is
// refused, counted as DynamoDB counts: attribute names included, strings
// by their UTF-8 bytes, a number by its significant digits (38 digits: 20
// bytes, not 38), lists and maps 3 bytes plus 1 per element.
func TestItemSizeLimit(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		put := func(it V) string {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
			return outcome(err)
		}
		const maxItem = 400 * 1024
		// "pk"+"s" = 3, "b" = 1: the padding fills the rest.
		require.Equal(t, "ok", put(V{"pk": S("s"), "b": S(strings.Repeat("x", maxItem-4))}))
		require.Equal(t, "validation", put(V{"pk": S("s"), "b": S(strings.Repeat("x", maxItem-3))}))
		// é is 2 bytes.
		require.Equal(t, "ok", put(V{"pk": S("s"), "b": S(strings.Repeat("é", (maxItem-4)/2))}))
		require.Equal(t, "validation", put(V{"pk": S("s"), "b": S(strings.Repeat("é", (maxItem-4)/2+1))}))
		// A long attribute name counts.
		name := strings.Repeat("n", 1000)
		require.Equal(t, "ok", put(V{"pk": S("s"), name: S(strings.Repeat("x", maxItem-3-1000))}))
		require.Equal(t, "validation", put(V{"pk": S("s"), name: S(strings.Repeat("x", maxItem-3-999))}))
		// Binary: raw bytes.
		require.Equal(t, "ok", put(V{"pk": S("s"), "b": &types.AttributeValueMemberB{Value: make([]byte, maxItem-4)}}))
		require.Equal(t, "validation", put(V{"pk": S("s"), "b": &types.AttributeValueMemberB{Value: make([]byte, maxItem-3)}}))
		// A number of 38 significant digits is 20 bytes: 3 + (1+20) + (1+pad).
		digits := strings.Repeat("9", 38)
		got := put(V{"pk": S("s"), "n": N(digits), "b": S(strings.Repeat("x", maxItem-3-21-1))})
		require.Equal(t, "ok", got, "numbers count by their significant digits")
		require.Equal(t, "validation", put(V{"pk": S("s"), "n": N(digits), "b": S(strings.Repeat("x", maxItem-3-21))}))
		// A list of two strings: 3 + 2×1 + values.
		require.Equal(t, "ok", put(V{"pk": S("s"), "l": L(S("a"), S(strings.Repeat("x", maxItem-3-1-3-2-1)))}))
		require.Equal(t, "validation", put(V{"pk": S("s"), "l": L(S("a"), S(strings.Repeat("x", maxItem-3-1-3-2)))}))
	})
}

// TestKeySizeLimits: a partition key value of up to 2048 bytes, a sort key
// value of up to 1024, string or binary.
func TestKeySizeLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newRangeTable(t, db, types.ScalarAttributeTypeB)
		put := func(pk int, sk int) string {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{
				"pk": &types.AttributeValueMemberB{Value: []byte(strings.Repeat("p", pk))}, "sk": S(strings.Repeat("s", sk))}})
			return outcome(err)
		}
		require.Equal(t, "ok", put(2048, 1024))
		require.Equal(t, "validation", put(2049, 1))
		require.Equal(t, "validation", put(1, 1025))
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: V{
			"pk": &types.AttributeValueMemberB{Value: []byte("p")}, "sk": S(strings.Repeat("s", 1025))}})
		require.Equal(t, "validation", outcome(err), "a key too long to exist is refused on reads too")
	})
}

// TestTransactionLimits: 100 actions are taken, 101 refused; so is a
// ClientRequestToken over 36 characters; the 4 MB and one-item-twice
// cases are in TestLimits and TestTransactWriteItems.
func TestTransactionLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		items := func(prefix string, n int) []types.TransactWriteItem {
			out := make([]types.TransactWriteItem, n)
			for i := range out {
				out[i] = types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S(fmt.Sprint(prefix, i))}}}
			}
			return out
		}
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items("a", 101)})
		require.Equal(t, "validation", outcome(err))
		require.Nil(t, get(t, db, table, "a0"))
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items("b", 100)})
		require.NoError(t, err)
		require.NotNil(t, get(t, db, table, "b99"))

		tok := testenv.Name("t")
		tok += strings.Repeat("x", 36-len(tok))
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: &tok, TransactItems: items("c", 1)})
		require.NoError(t, err, "a 36-character token")
		long := tok + "x"
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: &long, TransactItems: items("d", 1)})
		require.Equal(t, "validation", outcome(err), "a 37-character token")
	})
}

// TestExpressionPlaceholderLimits: an expression attribute name or value
// placeholder of up to 255 bytes ("#" included).
func TestExpressionPlaceholderLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		put := func(name, value string) string {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")},
				ConditionExpression:       aws.String(fmt.Sprintf("attribute_not_exists(%s) OR %s = %s", name, name, value)),
				ExpressionAttributeNames:  map[string]string{name: "pk"},
				ExpressionAttributeValues: V{value: S("x")}})
			return outcome(err)
		}
		require.Equal(t, "ok", put("#"+strings.Repeat("n", 254), ":"+strings.Repeat("v", 254)))
		require.Equal(t, "validation", put("#"+strings.Repeat("n", 255), ":v"))
		require.Equal(t, "validation", put("#n", ":"+strings.Repeat("v", 255)))
	})
}

// TestBatchGetItemResponseLimit: a BatchGetItem answers at most 16 MB;
// the keys past it come back in UnprocessedKeys, and asking for them gets
// the rest. 42 items of 400 KB: 16.4 MB.
func TestBatchGetItemResponseLimit(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		pad := strings.Repeat("x", 400*1024-10)
		var keys []map[string]types.AttributeValue
		for i := range 42 {
			pk := fmt.Sprintf("k%02d", i)
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S(pk), "b": S(pad)}})
			require.NoError(t, err)
			keys = append(keys, V{"pk": S(pk)})
		}
		out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: keys}}})
		require.NoError(t, err)
		first := len(out.Responses[table])
		left := len(out.UnprocessedKeys[table].Keys)
		require.Equal(t, 42, first+left, "every key answered or left unprocessed")
		require.Positive(t, left, "16.4 MB asked for: some keys left unprocessed")
		require.LessOrEqual(t, first*(400*1024-4), 16*1024*1024, "at most 16 MB answered")
		{
			again, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys})
			require.NoError(t, err)
			require.Len(t, again.Responses[table], left)
			require.Empty(t, again.UnprocessedKeys)
		}
	})
}

// TestQueryPageLimit: a Query page reads at most 1 MB; past it the page
// ends with a LastEvaluatedKey, and paging on gets every item once.
func TestQueryPageLimit(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newRangeTable(t, db, types.ScalarAttributeTypeS)
		pad := strings.Repeat("x", 300*1024)
		for i := range 7 {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("g"), "sk": S(fmt.Sprint(i)), "b": S(pad)}})
			require.NoError(t, err)
		}
		var got []string
		pages := 0
		var start map[string]types.AttributeValue
		for {
			out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :g"),
				ExpressionAttributeValues: V{":g": S("g")}, ExclusiveStartKey: start})
			require.NoError(t, err)
			pages++
			require.LessOrEqual(t, len(out.Items), 4, "300 KB items: a page reads at most 1 MB (the item that crosses it included)")
			for _, it := range out.Items {
				got = append(got, it["sk"].(*types.AttributeValueMemberS).Value)
			}
			start = out.LastEvaluatedKey
			if len(start) == 0 {
				break
			}
		}
		require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6"}, got)
		require.GreaterOrEqual(t, pages, 2)
	})
}
