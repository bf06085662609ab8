package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/operator"
)

// TestConflictsPages: the records that met conflicts, a Scan page at a
// time (bounded by the items read), latest conflict first within a page,
// with both payload hashes; records without a conflict are not listed.
func TestConflictsPages(t *testing.T) {
	ctx := context.Background()
	db := memdynamo.New()
	table := newTable(t, db)
	now := time.Now().Truncate(time.Millisecond)
	want := map[string]string{}
	for i := range 20 {
		at := now.Add(-time.Duration(20-i) * time.Minute)
		st := dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return at }))
		key := fmt.Sprintf("k%02d", i)
		req := dedup.ClaimRequest{Key: key, PayloadSHA256: dedup.PayloadHash("a"), MessageID: "m", Lease: time.Minute, TTL: time.Hour}
		c, err := st.Claim(ctx, req)
		require.NoError(t, err)
		require.NoError(t, st.Complete(ctx, c, nil, time.Hour))
		if i%3 != 0 {
			continue
		}
		req.PayloadSHA256 = dedup.PayloadHash("b" + key)
		b, err := st.Claim(ctx, req)
		require.NoError(t, err)
		require.Equal(t, dedup.Conflict, b.Outcome)
		require.NoError(t, st.NoteConflict(ctx, b, req.PayloadSHA256, "m-"+key))
		want[key] = req.PayloadSHA256
	}
	got := map[string]string{}
	var start map[string]ddbtypes.AttributeValue
	for {
		p, err := operator.Conflicts(ctx, db, table, now, start, 6)
		require.NoError(t, err)
		require.LessOrEqual(t, p.Scanned, 6)
		for i, r := range p.Records {
			require.Equal(t, dedup.PayloadHash("a"), r.PayloadSHA256)
			require.Equal(t, "m-"+r.Key, r.LastConflict.MessageID)
			if i > 0 {
				require.False(t, r.LastConflict.At.After(p.Records[i-1].LastConflict.At), "latest first")
			}
			got[r.Key] = r.LastConflict.PayloadSHA256
		}
		if start = p.Next; start == nil {
			break
		}
	}
	require.Equal(t, want, got)
}
