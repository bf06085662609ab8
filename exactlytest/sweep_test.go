package exactlytest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/exactlytest"
)

// TestSweepExpiredDeletesWhatTTLWould: an expired item stays readable until
// the sweep the test asks for, which deletes it and says so; an item not yet
// expired, or one the test does not call due, stays.
func TestSweepExpiredDeletesWhatTTLWould(t *testing.T) {
	ctx := context.Background()
	db := exactlytest.NewEmptyDynamoDB()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("ttl-items"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("ttl-items"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}})
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	put := func(pk string, exp time.Time) {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ttl-items"), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)}}})
		require.NoError(t, err)
	}
	put("old", now.Add(-time.Hour))
	put("spared", now.Add(-time.Hour))
	put("young", now.Add(time.Hour))
	swept := db.SweepExpired(now, func(_ string, key map[string]types.AttributeValue, _ time.Time) bool {
		return key["pk"].(*types.AttributeValueMemberS).Value != "spared"
	})
	require.Len(t, swept, 1)
	require.Equal(t, "ttl-items", swept[0].Table)
	require.Equal(t, "old", swept[0].Item["pk"].(*types.AttributeValueMemberS).Value)
	require.Equal(t, now.Add(-time.Hour), swept[0].ExpiresAt)
	for pk, want := range map[string]bool{"old": false, "spared": true, "young": true} {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ttl-items"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}})
		require.NoError(t, err)
		require.Equal(t, want, out.Item != nil, pk)
	}
}
