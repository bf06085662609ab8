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

// TestScan: pages of Limit items read, the filter applied after the limit
// (a page may come back with fewer items, or none, and a LastEvaluatedKey),
// every item read once across the pages.
func TestScan(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		for i := range 25 {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S(fmt.Sprintf("k%02d", i)), "n": N(fmt.Sprint(i))}})
			require.NoError(t, err)
		}
		var got []string
		var start map[string]types.AttributeValue
		pages := 0
		for {
			out, err := db.Scan(ctx, &dynamodb.ScanInput{
				TableName: &table, Limit: aws.Int32(10), ExclusiveStartKey: start,
				FilterExpression:          aws.String("#n >= :lo"),
				ExpressionAttributeNames:  map[string]string{"#n": "n"},
				ExpressionAttributeValues: V{":lo": N("5")},
			})
			require.NoError(t, err)
			pages++
			require.LessOrEqual(t, out.ScannedCount, int32(10))
			for _, it := range out.Items {
				got = append(got, it["pk"].(*types.AttributeValueMemberS).Value)
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			start = out.LastEvaluatedKey
		}
		require.GreaterOrEqual(t, pages, 3, "25 items read 10 at a time")
		sort.Strings(got)
		require.Len(t, got, 20)
		require.Equal(t, "k05", got[0])
		require.Equal(t, "k24", got[19])
	})
}
