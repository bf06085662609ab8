package memdynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
)

// TestSweepExpired: as DynamoDB's TTL, the sweep deletes only items of a
// table with TTL on whose attribute is a number of epoch seconds in the
// past (not more than five years past), and only those the caller says
// are due; the rest stay readable.
func TestSweepExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memdynamo.New()
	now := time.Now()
	for _, name := range []string{"ttl-on", "ttl-off"} {
		_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		})
		require.NoError(t, err)
		items := map[string]types.AttributeValue{
			"past":     N(fmt.Sprint(now.Add(-time.Minute).Unix())),
			"notdue":   N(fmt.Sprint(now.Add(-time.Minute).Unix())),
			"future":   N(fmt.Sprint(now.Add(time.Hour).Unix())),
			"ancient":  N(fmt.Sprint(now.AddDate(-6, 0, 0).Unix())),
			"string":   S(fmt.Sprint(now.Add(-time.Minute).Unix())),
			"fraction": N(fmt.Sprintf("%d.5", now.Add(-time.Minute).Unix())),
		}
		for pk, exp := range items {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: V{"pk": S(pk), "exp": exp}})
			require.NoError(t, err)
		}
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: V{"pk": S("none")}})
		require.NoError(t, err)
	}
	_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("ttl-on"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}})
	require.NoError(t, err)
	units := db.WriteUnits()
	swept := db.SweepExpired(now, func(table string, key map[string]types.AttributeValue, _ time.Time) bool {
		require.Equal(t, "ttl-on", table)
		return key["pk"].(*types.AttributeValueMemberS).Value != "notdue"
	})
	var got []string
	for _, s := range swept {
		got = append(got, s.Item["pk"].(*types.AttributeValueMemberS).Value)
	}
	require.ElementsMatch(t, []string{"fraction", "past"}, got)
	require.Equal(t, units, db.WriteUnits(), "free, as DynamoDB's own deletes")
	for _, table := range []string{"ttl-on", "ttl-off"} {
		for _, pk := range []string{"past", "notdue", "future", "ancient", "string", "fraction", "none"} {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: V{"pk": S(pk)}})
			require.NoError(t, err)
			gone := table == "ttl-on" && (pk == "past" || pk == "fraction")
			require.Equal(t, gone, out.Item == nil, "%s/%s", table, pk)
		}
	}
}
