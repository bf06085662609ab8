package memdynamo_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// newIndexedTable makes a table keyed (pk S, sk N) with a sparse global
// secondary index "byShard" keyed (shard S, since N): the outbox's shape.
func newIndexedTable(t *testing.T, db DB, projection types.ProjectionType) string {
	t.Helper()
	return createTable(t, db, "mq", &dynamodb.CreateTableInput{
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("shard"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("since"), AttributeType: types.ScalarAttributeTypeN},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("byShard"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("shard"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("since"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: projection},
		}},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly},
	})
}

// keys renders the (pk, sk) of query results.
func keys(items []V) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it["pk"].(*types.AttributeValueMemberS).Value+"/"+it["sk"].(*types.AttributeValueMemberN).Value)
	}
	return out
}

func TestQuery(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newIndexedTable(t, db, types.ProjectionTypeAll)
		desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
		require.NoError(t, err)
		require.Len(t, desc.Table.GlobalSecondaryIndexes, 1)
		require.Equal(t, "byShard", aws.ToString(desc.Table.GlobalSecondaryIndexes[0].IndexName))
		require.NotEmpty(t, aws.ToString(desc.Table.LatestStreamArn), "the stream is on")

		// Numbers sort as numbers (10 after 9), not as text.
		for _, sk := range []string{"10", "2", "0", "9", "1"} {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("g1"), "sk": N(sk), "v": S("x" + sk)}})
			require.NoError(t, err)
		}
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("g2"), "sk": N("1")}})
		require.NoError(t, err)

		q := func(in *dynamodb.QueryInput) *dynamodb.QueryOutput {
			t.Helper()
			in.TableName = &table
			out, err := db.Query(ctx, in)
			require.NoError(t, err)
			return out
		}
		out := q(&dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :g"), ExpressionAttributeValues: V{":g": S("g1")}, ConsistentRead: aws.Bool(true)})
		require.Equal(t, []string{"g1/0", "g1/1", "g1/2", "g1/9", "g1/10"}, keys(out.Items))
		require.Empty(t, out.LastEvaluatedKey)
		require.EqualValues(t, 5, out.Count)

		out = q(&dynamodb.QueryInput{KeyConditionExpression: aws.String("#p = :g AND #s > :s"), ExpressionAttributeNames: map[string]string{"#p": "pk", "#s": "sk"},
			ExpressionAttributeValues: V{":g": S("g1"), ":s": N("1")}, Limit: aws.Int32(2)})
		require.Equal(t, []string{"g1/2", "g1/9"}, keys(out.Items))
		require.Equal(t, render(V{"pk": S("g1"), "sk": N("9")}), render(out.LastEvaluatedKey), "a page cut by Limit says where it ended")
		out = q(&dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :g AND sk > :s"), ExpressionAttributeValues: V{":g": S("g1"), ":s": N("1")},
			ExclusiveStartKey: out.LastEvaluatedKey})
		require.Equal(t, []string{"g1/10"}, keys(out.Items))

		out = q(&dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :g AND sk BETWEEN :a AND :b"), ExpressionAttributeValues: V{":g": S("g1"), ":a": N("1"), ":b": N("9")},
			ScanIndexForward: aws.Bool(false), ProjectionExpression: aws.String("pk, sk")})
		require.Equal(t, []string{"g1/9", "g1/2", "g1/1"}, keys(out.Items))
		require.NotContains(t, out.Items[0], "v", "the projection")

		out = q(&dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :g"), ExpressionAttributeValues: V{":g": S("none")}})
		require.Empty(t, out.Items)

		for name, in := range map[string]*dynamodb.QueryInput{
			"no hash key":      {KeyConditionExpression: aws.String("sk = :s"), ExpressionAttributeValues: V{":s": N("1")}},
			"hash key range":   {KeyConditionExpression: aws.String("pk > :g"), ExpressionAttributeValues: V{":g": S("g1")}},
			"OR":               {KeyConditionExpression: aws.String("pk = :g OR sk = :s"), ExpressionAttributeValues: V{":g": S("g1"), ":s": N("1")}},
			"not a key":        {KeyConditionExpression: aws.String("pk = :g AND v = :s"), ExpressionAttributeValues: V{":g": S("g1"), ":s": S("x1")}},
			"limit zero":       {KeyConditionExpression: aws.String("pk = :g"), ExpressionAttributeValues: V{":g": S("g1")}, Limit: aws.Int32(0)},
			"unused value":     {KeyConditionExpression: aws.String("pk = :g"), ExpressionAttributeValues: V{":g": S("g1"), ":x": S("x")}},
			"consistent index": {IndexName: aws.String("byShard"), KeyConditionExpression: aws.String("#sh = :s"), ExpressionAttributeNames: map[string]string{"#sh": "shard"}, ExpressionAttributeValues: V{":s": S("0")}, ConsistentRead: aws.Bool(true)},
			"no such index":    {IndexName: aws.String("nope"), KeyConditionExpression: aws.String("#sh = :s"), ExpressionAttributeNames: map[string]string{"#sh": "shard"}, ExpressionAttributeValues: V{":s": S("0")}},
		} {
			in.TableName = &table
			_, err := db.Query(ctx, in)
			require.Equal(t, "validation", outcome(err), name)
		}
	})
}

func TestQueryIndex(t *testing.T) {
	t.Parallel()
	for _, projection := range []types.ProjectionType{types.ProjectionTypeAll, types.ProjectionTypeKeysOnly} {
		each(t, func(t *testing.T, db DB) {
			ctx := context.Background()
			table := newIndexedTable(t, db, projection)
			// Three heads in shard 0 (one without since: not indexed), one in shard 1.
			for i, since := range []string{"300", "100", "", "200"} {
				it := V{"pk": S(fmt.Sprint("g", i)), "sk": N("0"), "shard": S("0"), "extra": S("e")}
				if since != "" {
					it["since"] = N(since)
				}
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
				require.NoError(t, err)
			}
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("h"), "sk": N("0"), "shard": S("1"), "since": N("50")}})
			require.NoError(t, err)

			query := func(shard string, limit int32) *dynamodb.QueryOutput {
				t.Helper()
				out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, IndexName: aws.String("byShard"),
					KeyConditionExpression: aws.String("#sh = :s"), ExpressionAttributeNames: map[string]string{"#sh": "shard"}, ExpressionAttributeValues: V{":s": S(shard)}, Limit: aws.Int32(limit)})
				require.NoError(t, err)
				return out
			}
			out := query("0", 10)
			require.Equal(t, []string{"g1/0", "g3/0", "g0/0"}, keys(out.Items), "oldest since first; the item without since is not in the index")
			if projection == types.ProjectionTypeKeysOnly {
				require.NotContains(t, out.Items[0], "extra")
				require.Contains(t, out.Items[0], "since")
			} else {
				require.Equal(t, S("e"), out.Items[0]["extra"])
			}
			out = query("0", 1)
			require.Equal(t, []string{"g1/0"}, keys(out.Items))
			require.Equal(t, render(V{"pk": S("g1"), "sk": N("0"), "shard": S("0"), "since": N("100")}), render(out.LastEvaluatedKey), "an index page's key holds the table's and the index's keys")

			// Leaving the index: REMOVE its key attribute.
			_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("g1"), "sk": N("0")}, UpdateExpression: aws.String("REMOVE #sh, since"), ExpressionAttributeNames: map[string]string{"#sh": "shard"}})
			require.NoError(t, err)
			require.Equal(t, []string{"g3/0", "g0/0"}, keys(query("0", 10).Items))

			// An index key of the wrong type is refused at write time.
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("bad"), "sk": N("0"), "since": S("text")}})
			require.Equal(t, "validation", outcome(err))
			_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("g0"), "sk": N("0")}, UpdateExpression: aws.String("SET #sh = :x"), ExpressionAttributeNames: map[string]string{"#sh": "shard"}, ExpressionAttributeValues: V{":x": N("1")}})
			require.Equal(t, "validation", outcome(err))
			_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &table, Item: V{"pk": S("bad"), "sk": N("0"), "shard": S("")}}},
			}})
			require.Equal(t, "validation", outcome(err), "an empty index key")
		})
	}
}

func TestBatchGetItem(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newIndexedTable(t, db, types.ProjectionTypeAll)
		for _, sk := range []string{"0", "1", "2"} {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("g"), "sk": N(sk), "v": S("x" + sk)}})
			require.NoError(t, err)
		}
		key := func(sk string) V { return V{"pk": S("g"), "sk": N(sk)} }
		out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("2"), key("0"), key("7")}, ConsistentRead: aws.Bool(true)},
		}})
		require.NoError(t, err)
		require.Empty(t, out.UnprocessedKeys)
		got := keys(out.Responses[table])
		sort.Strings(got)
		require.Equal(t, []string{"g/0", "g/2"}, got, "the items that exist, in any order")
		require.Equal(t, S("x2"), func() types.AttributeValue {
			for _, it := range out.Responses[table] {
				if it["sk"].(*types.AttributeValueMemberN).Value == "2" {
					return it["v"]
				}
			}
			return nil
		}())

		out, err = db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("1")}, ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: map[string]string{"#s": "sk"}},
		}})
		require.NoError(t, err)
		require.Equal(t, []string{render(V{"sk": N("1")})}, []string{render(out.Responses[table][0])})

		var many []map[string]types.AttributeValue
		for i := range 101 {
			many = append(many, key(fmt.Sprint(i)))
		}
		for name, in := range map[string]*dynamodb.BatchGetItemInput{
			"duplicates": {RequestItems: map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{key("1"), key("1")}}}},
			"over 100":   {RequestItems: map[string]types.KeysAndAttributes{table: {Keys: many}}},
			"bad key":    {RequestItems: map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{{"pk": S("g")}}}}},
		} {
			_, err := db.BatchGetItem(ctx, in)
			require.Equal(t, "validation", outcome(err), name)
		}
	})
}
