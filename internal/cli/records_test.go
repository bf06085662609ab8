package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestOperatorCommands: inspect finds a record by its scoped key or by the
// message (the key scoped as the worker scopes it), stuck lists the claims
// whose lease ended, oldest first, and forget deletes only with --yes.
// Against DynamoDB Local (Scan is not in the in-memory fake).
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the local stack (make test starts it)")
	}
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db, true)
	// Records keep epoch milliseconds: a clock on whole milliseconds makes
	// the printed ages exact (time.Now() once printed 9m0.001s for 9m).
	now := time.Now().Truncate(time.Millisecond)
	at := func(ago time.Duration) *dedup.Store {
		return dedup.NewStore(db, table, dedup.WithClock(func() time.Time { return now.Add(-ago) }))
	}
	q := memsqs.New()
	url, _ := memsqs.NewQueue(t, q, true, map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}, 0)
	scope := dedup.Scope{Namespace: "exactly", Queue: url[strings.LastIndexByte(url, '/')+1:], PerGroup: true}

	claim := func(st *dedup.Store, key, msgID string, lease time.Duration) dedup.Claim {
		c, err := st.Claim(ctx, dedup.ClaimRequest{Key: key, PayloadSHA256: dedup.PayloadHash(key), MessageID: msgID, Group: "g1",
			Attempts: 2, Lease: lease, TTL: time.Hour})
		require.NoError(t, err)
		require.Equal(t, dedup.Won, c.Outcome)
		return c
	}
	done := scope.Key("g1", "d-done")
	c := claim(at(0), done, "m-done", time.Minute)
	require.NoError(t, at(0).Complete(ctx, c, []byte(`{"sent":true}`), time.Hour))
	old := claim(at(10*time.Minute), scope.Key("g1", "d-old"), "m-old", time.Minute)
	recent := claim(at(3*time.Minute), scope.Key("g2", "d-recent"), "m-recent", time.Minute)
	claim(at(0), scope.Key("g3", "d-live"), "m-live", time.Minute) // a live lease: not stuck

	fs := config.NewSet("worker inspect", io.Discard, func(string) (string, bool) { return "", false })
	var out bytes.Buffer
	a := inspectArgs{table: table, namespace: "exactly", queue: url, group: "g1", dedupID: "d-done"}
	require.NoError(t, inspect(ctx, db, q, a, fs, &out, now))
	require.Contains(t, out.String(), "key:            "+done)
	require.Contains(t, out.String(), "status:         COMPLETED")
	require.Contains(t, out.String(), "message_id:     m-done")
	require.Contains(t, out.String(), `result:         {"sent":true}`)
	out.Reset()
	require.NoError(t, inspect(ctx, db, q, inspectArgs{table: table, key: old.Key}, fs, &out, now))
	require.Contains(t, out.String(), "lease:          ended 9m0s ago")
	require.ErrorContains(t, inspect(ctx, db, q, inspectArgs{table: table, namespace: "exactly", queue: url, dedupID: "d-done"}, fs, &out, now),
		"deduplicates per message group: give --group")
	require.ErrorContains(t, inspect(ctx, db, q, inspectArgs{table: table, key: "nope"}, fs, &out, now), "no record")

	out.Reset()
	require.NoError(t, stuck(ctx, db, table, 10, &out, now))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "2 IN_PROGRESS records with their lease ended in "+table, lines[0])
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[1], old.Key+"  lease ended 9m0s ago"), "oldest first: %s", lines[1])
	require.True(t, strings.HasPrefix(lines[2], recent.Key), lines[2])
	out.Reset()
	require.NoError(t, stuck(ctx, db, table, 1, &out, now))
	require.Contains(t, out.String(), "... and 1 more")

	out.Reset()
	require.ErrorIs(t, forget(ctx, db, table, old.Key, false, &out, now), errNotConfirmed)
	r, err := readRecord(ctx, db, table, old.Key)
	require.NoError(t, err)
	require.NotNil(t, r, "not deleted without --yes")
	require.NoError(t, forget(ctx, db, table, old.Key, true, &out, now))
	r, err = readRecord(ctx, db, table, old.Key)
	require.NoError(t, err)
	require.Nil(t, r)
	require.Contains(t, out.String(), "deleted "+old.Key)
}
