package dedupcontract

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// carriedWrites is an effect's output: a counter's update, then the
// per-message entry (the carrier, write 1) conditioned on its absence.
func carriedWrites(table, entry string, limit int) []types.TransactWriteItem {
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "counter"}},
			UpdateExpression:          aws.String("ADD n :one"),
			ConditionExpression:       aws.String("attribute_not_exists(n) OR n < :limit"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)}},
		}},
		{Put: &types.Put{
			TableName: &table, Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: entry}, "note": &types.AttributeValueMemberS{Value: "x"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}
}

// The carried commit: no record item; the record's attributes on the
// effect's own per-message item (the carrier), its condition the carrier's.

func (s *suite) testCarried(t *testing.T) {
	ctx := context.Background()
	db := s.db
	table := Table(t, db)
	st := dedup.NewStore(db, table)
	req := func(key, hash, token string) dedup.ClaimRequest {
		return dedup.ClaimRequest{Key: key, PayloadSHA256: "sha256:" + hash, MessageID: "m-" + key, Token: token}
	}

	c, err := st.CommitCarried(ctx, req("k1", "aa", "t1"), []byte("r1"), carriedWrites(table, "entry#k1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, dedup.Won, c.Outcome)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "entry#k1"}}})
	require.NoError(t, err)
	rec, err := dedup.DecodeRecord(got.Item)
	require.NoError(t, err)
	require.Equal(t, dedup.StatusCompleted, rec.Status)
	require.Equal(t, "x", dedup.GetS(got.Item, "note"), "the effect's attributes kept")
	require.Equal(t, []byte("r1"), rec.Result)
	require.Zero(t, dedup.GetN(got.Item, dedup.AttrExpiresAt), "no expiry of the record's own: the item's lifetime is the window")
	rec0, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k1"}}})
	require.NoError(t, err)
	require.Empty(t, rec0.Item, "no record item of its own")

	// The same commit retried after a lost response: ours.
	c, err = st.CommitCarried(ctx, req("k1", "aa", "t1"), []byte("r1"), carriedWrites(table, "entry#k1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, dedup.Won, c.Outcome)

	// A redelivery: duplicate, with the stored result; nothing applied.
	c, err = st.CommitCarried(ctx, req("k1", "aa", "t2"), []byte("other"), carriedWrites(table, "entry#k1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, dedup.Duplicate, c.Outcome)
	require.Equal(t, "k1", c.Record.Key)
	require.Equal(t, []byte("r1"), c.Record.Result)

	// The key reused for another payload: conflict.
	c, err = st.CommitCarried(ctx, req("k1", "bb", "t3"), nil, carriedWrites(table, "entry#k1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, dedup.Conflict, c.Outcome)

	// The carrier alone goes as a PutItem, same verdicts.
	c, err = st.CommitCarried(ctx, req("k1", "aa", "t4"), nil, carriedWrites(table, "entry#k1", 10)[1:], 0)
	require.NoError(t, err)
	require.Equal(t, dedup.Duplicate, c.Outcome)

	// The effect's own condition fails: its index among the writes.
	_, err = st.CommitCarried(ctx, req("k2", "aa", "t5"), nil, carriedWrites(table, "entry#k2", 1), 1)
	var ece *dedup.EffectConditionError
	require.ErrorAs(t, err, &ece)
	require.Equal(t, 0, ece.Index)

	// An item that exists without a record: a verdict on the carrier.
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "entry#k3"}}})
	require.NoError(t, err)
	_, err = st.CommitCarried(ctx, req("k3", "aa", "t6"), nil, carriedWrites(table, "entry#k3", 10), 1)
	require.ErrorAs(t, err, &ece)
	require.Equal(t, 1, ece.Index)

	// Malformed carriers: refused before any request.
	noCond := carriedWrites(table, "entry#k4", 10)
	noCond[1].Put.ConditionExpression = nil
	reserved := carriedWrites(table, "entry#k4", 10)
	reserved[1].Put.Item[dedup.AttrStatus] = &types.AttributeValueMemberS{Value: "mine"}
	for name, c := range map[string]struct {
		writes  []types.TransactWriteItem
		carrier int
	}{
		"an update": {carriedWrites(table, "entry#k4", 10), 0}, "out of range": {carriedWrites(table, "entry#k4", 10), 2},
		"no condition": {noCond, 1}, "a reserved attribute": {reserved, 1},
	} {
		_, err := st.CommitCarried(ctx, req("k4", "aa", "t7"), nil, c.writes, c.carrier)
		require.ErrorIs(t, err, dedup.ErrInvalid, name)
	}
}
