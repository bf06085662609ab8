package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/outbox"
)

// TestListingsReadPastOnePage: a Query answers at most 1 MB a page, so a
// group of messages near SQS's size limit spans pages. The listings the
// operator reads (worker outbox, the console) must still show every
// message up to their limit, not the first page's three or four.
func TestListingsReadPastOnePage(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		const n = 7 // 7 x 200 KB: two pages at least
		for i := range n {
			m := msg(e.q1, "a", fmt.Sprint("a", i))
			m.Body = fmt.Sprint("a", i, strings.Repeat("x", 200_000))
			require.NoError(t, ob.Write(ctx, []outbox.Message{m}))
		}
		items, err := outbox.ListGroup(ctx, e.db, e.table, e.q1, "a", 10)
		require.NoError(t, err)
		require.Equal(t, n, len(items), "every message of the group") //nolint:testifylint // Len would print 1.4 MB of bodies
		for i, it := range items {
			require.True(t, strings.HasPrefix(it.Body, fmt.Sprint("a", i, "x")), "in sequence order: item %d", i)
		}
		last, err := outbox.ListGroup(ctx, e.db, e.table, e.q1, "a", 2)
		require.NoError(t, err)
		require.Equal(t, 2, len(last), "the newest two") //nolint:testifylint // as above
		require.True(t, strings.HasPrefix(last[1].Body, fmt.Sprint("a", n-1, "x")))

		pending, err := outbox.ListPending(ctx, e.db, e.table, 10)
		require.NoError(t, err)
		require.Equal(t, n, len(pending), "every pending message of the group") //nolint:testifylint // as above
	})
}

// groupsIn returns n group names of queue whose pending-index shard is
// shard, tagged with prefix.
func groupsIn(queue, shard, prefix string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if g := fmt.Sprint(prefix, i); outbox.ShardOf(queue, g) == shard {
			out = append(out, g)
		}
	}
	return out
}

// TestListPendingAcrossShards: the oldest groups first across the pending
// index's shards, not shard by shard (a lower shard's young groups hid an
// older group in a higher shard), and a held group always listed, however
// many older groups fill the limit.
func TestListPendingAcrossShards(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		now := time.Now().Truncate(time.Millisecond)
		at := func(ago time.Duration) *outbox.Outbox {
			return outbox.New(e.db, e.table, outbox.WithClock(func() time.Time { return now.Add(-ago) }))
		}
		q := newQueue(t, e, nil)
		held := groupsIn(q, "7", "held-", 1)[0]
		old := groupsIn(q, "6", "old-", 1)[0]
		// A young group held at its first message, in shard 7.
		require.NoError(t, at(0).Write(ctx, []outbox.Message{{QueueURL: q, Group: held, Body: bigBody("h1", 4096), ID: "id-h1"}}))
		setMaxSize(t, e, q, 1024)
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Held)
		// The oldest group, in shard 6; then six groups younger than it
		// but older than the held one, in shard 0.
		require.NoError(t, at(time.Hour).Write(ctx, []outbox.Message{msg(q, old, "o1"), msg(q, old, "o2")}))
		for i, g := range groupsIn(q, "0", "young-", 6) {
			require.NoError(t, at(time.Duration(30-i)*time.Minute).Write(ctx, []outbox.Message{msg(q, g, g)}))
		}

		pending, err := outbox.ListPending(ctx, e.db, e.table, 5)
		require.NoError(t, err)
		require.Len(t, pending, 6, "five of the oldest groups, and the held one")
		require.Equal(t, old, pending[0].Group, "the oldest group first, from shard 6")
		require.Equal(t, old, pending[1].Group)
		for i := 2; i < 5; i++ {
			require.True(t, strings.HasPrefix(pending[i].Group, "young-"), pending[i].Group)
			require.False(t, pending[i].Created.Before(pending[i-1].Created), "by age")
		}
		require.Equal(t, held, pending[5].Group, "the held group, listed though the limit was reached")
		require.NotEmpty(t, pending[5].Held)
		require.Equal(t, "id-h1", pending[5].ID)
	})
}
