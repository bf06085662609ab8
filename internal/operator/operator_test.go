package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/operator"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

func newTable(t *testing.T, db *memdynamo.DB) string {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("dedup"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPK), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(dedup.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	return "dedup"
}

// TestStuckPages: the stuck list read a page at a time, each page bounded
// by the items it reads, oldest lease first within a page, all of them
// across the pages; a live lease, a completed record are not listed.
func TestStuckPages(t *testing.T) {
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	now := time.Now().Truncate(time.Millisecond)
	for i := range 30 {
		st := dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return now.Add(-time.Duration(i+2) * time.Minute) }))
		_, err := st.Claim(ctx, dedup.ClaimRequest{Key: fmt.Sprintf("k%02d", i), PayloadSHA256: "h", MessageID: "m", Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
	}
	live := dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return now }))
	_, err := live.Claim(ctx, dedup.ClaimRequest{Key: "live", PayloadSHA256: "h", MessageID: "m", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)

	var all []*dedup.Record
	var start map[string]ddbtypes.AttributeValue
	pages := 0
	for {
		p, err := operator.Stuck(ctx, db, table, now, start, 10)
		require.NoError(t, err)
		require.LessOrEqual(t, p.Scanned, 10)
		for i := 1; i < len(p.Records); i++ {
			require.False(t, p.Records[i].LeaseUntil.Before(p.Records[i-1].LeaseUntil), "oldest first")
		}
		all = append(all, p.Records...)
		pages++
		if start = p.Next; start == nil {
			break
		}
	}
	require.Equal(t, 4, pages)
	require.Len(t, all, 30)
	operator.SortStuck(all)
	require.Equal(t, "k29", all[0].Key)
}

// TestForget: deleted only while it is the record shown; gone, it says so.
func TestForget(t *testing.T) {
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	st := dedup.NewStore(db, table)
	c, err := st.Claim(ctx, dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", MessageID: "m", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	r, err := operator.ReadRecord(ctx, db, table, "k")
	require.NoError(t, err)
	require.ErrorIs(t, operator.Forget(ctx, db, table, &dedup.Record{Key: "k", Status: r.Status, Token: "another-token", LeaseUntil: r.LeaseUntil}), operator.ErrChanged)
	require.NoError(t, operator.Forget(ctx, db, table, r))
	r, err = operator.ReadRecord(ctx, db, table, "k")
	require.NoError(t, err)
	require.Nil(t, r)
	require.ErrorIs(t, operator.Forget(ctx, db, table, &dedup.Record{Key: "k", Status: dedup.StatusInProgress, Token: c.Token, LeaseUntil: c.LeaseUntil}), operator.ErrNoRecord)
}

// TestScopedKeyAndDescribe: the key as the worker scopes it; a queue that
// deduplicates per group wants the group; a queue described with its DLQ.
func TestScopedKeyAndDescribe(t *testing.T) {
	ctx := context.Background()
	q := memsqs.New()
	url, dlq := memsqs.NewQueue(t, q, true, map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}, 3)
	_, err := operator.ScopedKey(ctx, q, operator.Lookup{})
	require.ErrorIs(t, err, operator.ErrNoLookup)
	_, err = operator.ScopedKey(ctx, q, operator.Lookup{Queue: url})
	require.ErrorIs(t, err, operator.ErrNoMessage)
	_, err = operator.ScopedKey(ctx, q, operator.Lookup{Queue: url, DedupID: "d"})
	require.ErrorIs(t, err, operator.ErrNeedGroup)
	k, err := operator.ScopedKey(ctx, q, operator.Lookup{Namespace: "ns", Queue: url, Group: "g", DedupID: "d", MessageID: "m"})
	require.NoError(t, err)
	require.Equal(t, dedup.Scope{Namespace: "ns", Queue: sqsmsg.QueueName(url), PerGroup: true}.Key("g", "d"), k)

	qi, err := operator.DescribeQueue(ctx, q, url)
	require.NoError(t, err)
	require.True(t, qi.FIFO)
	require.Equal(t, "messageGroup", qi.DedupScope)
	require.Equal(t, dlq, qi.DLQURL)
	require.Equal(t, 3, qi.MaxReceives)
	_, err = operator.DescribeQueue(ctx, q, url+"-gone")
	require.ErrorContains(t, err, "cannot read queue")
}

// TestForgetRefusesARecordCompletedSinceShown: a record listed as stuck
// (IN_PROGRESS, its lease ended) whose slow worker completes it under the
// same token between the operator's read and the confirmation is not
// deleted (deleting it would run the effect again on the message's next
// delivery); the error says what the record is now. A lease extended
// since (the worker is alive) is refused too.
func TestForgetRefusesARecordCompletedSinceShown(t *testing.T) {
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	now := time.Now().Truncate(time.Millisecond)
	st := dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return now.Add(-10 * time.Minute) }))
	c, err := st.Claim(ctx, dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", MessageID: "m", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	p, err := operator.Stuck(ctx, db, table, now, nil, 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	shown := p.Records[0]

	require.NoError(t, st.Complete(ctx, c, []byte("ok"), time.Hour)) // the slow worker, same token
	err = operator.Forget(ctx, db, table, shown)
	require.ErrorIs(t, err, operator.ErrChanged)
	var ce *operator.ChangedError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, dedup.StatusCompleted, ce.Now.Status)
	require.Contains(t, err.Error(), "COMPLETED")
	r, err := operator.ReadRecord(ctx, db, table, "k")
	require.NoError(t, err)
	require.NotNil(t, r, "the completed record stays")
	require.Equal(t, dedup.StatusCompleted, r.Status)

	// A lease the worker extended since it was shown: refused too.
	c2, err := st.Claim(ctx, dedup.ClaimRequest{Key: "k2", PayloadSHA256: "h", MessageID: "m2", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	shown2, err := operator.ReadRecord(ctx, db, table, "k2")
	require.NoError(t, err)
	require.NoError(t, dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return now })).Extend(ctx, &c2, time.Minute))
	require.ErrorIs(t, operator.Forget(ctx, db, table, shown2), operator.ErrChanged)
	// Read again, as it is now: deleted.
	shown2, err = operator.ReadRecord(ctx, db, table, "k2")
	require.NoError(t, err)
	require.NoError(t, operator.Forget(ctx, db, table, shown2))
}
