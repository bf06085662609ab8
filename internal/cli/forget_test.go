package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/operator"
)

// beforeDelete runs a hook before each DeleteItem: what happens between
// forget's read and its delete.
type beforeDelete struct {
	*memdynamo.DB
	hook func()
}

func (b beforeDelete) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	b.hook()
	return b.DB.DeleteItem(ctx, in, optFns...)
}

// TestForgetCompletedSinceRead: worker forget --yes on a stuck record whose
// slow worker completes it, under the same token, after forget read it:
// nothing deleted, the record as it is now printed, an error (non-zero
// exit) that says so.
func TestForgetCompletedSinceRead(t *testing.T) {
	ctx := context.Background()
	mem := memdynamo.New()
	table := "dedup"
	_, err := mem.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPK), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(dedup.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	now := time.Now().Truncate(time.Millisecond)
	st := dedup.NewStore(mem, table, dedup.WithClock(func() time.Time { return now.Add(-10 * time.Minute) }))
	c, err := st.Claim(ctx, dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", MessageID: "m", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	db := beforeDelete{DB: mem, hook: func() { require.NoError(t, st.Complete(ctx, c, []byte("ok"), time.Hour)) }}

	var out bytes.Buffer
	err = forget(ctx, db, table, "k", true, &out, now)
	require.ErrorIs(t, err, operator.ErrChanged)
	require.Contains(t, err.Error(), "it is now COMPLETED")
	require.Contains(t, out.String(), "not deleted: the record changed since it was read")
	require.Contains(t, out.String(), "status:         COMPLETED")
	require.NotContains(t, out.String(), "deleted k")
	r, err := readRecord(ctx, mem, table, "k")
	require.NoError(t, err)
	require.NotNil(t, r, "the completed record stays")
}
