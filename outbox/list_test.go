package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
