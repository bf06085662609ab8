package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// TestInspectWhereNow: worker inspect says where the message is now, over
// the in-memory stores the console's tests seed: a message that went to
// the DLQ before any claim (found there with its failure reason), a done
// one with the conflicts noted on its record (its queue found from its
// key, its DLQ searched), a search turned off, and a message nowhere
// known (an error that says where it looked).
func TestInspectWhereNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	w, err := consoletest.New(ctx, now)
	require.NoError(t, err)
	fs := config.NewSet("worker inspect", io.Discard, func(string) (string, bool) { return "", false })
	run := func(a inspectArgs) (string, error) {
		a.table, a.namespace = w.DedupTable, w.Namespace
		var out bytes.Buffer
		err := inspect(ctx, w.DB, w.SQS, a, fs, &out, now)
		return out.String(), err
	}

	out, err := run(inspectArgs{queue: w.Queue, dedupID: "order-1410", dlqSearch: 100})
	require.NoError(t, err)
	require.Contains(t, out, "record:         none\n")
	require.Contains(t, out, "where:          in the dead-letter queue orders-dlq.fifo since ")
	require.Contains(t, out, "group acct-9")
	require.Contains(t, out, "failure:        effect: payload is not JSON: invalid character 'x' (at ")

	out, err = run(inspectArgs{key: w.DoneKey, dlqSearch: 100})
	require.NoError(t, err)
	require.Contains(t, out, "status:         COMPLETED\n")
	require.Contains(t, out, "conflicts:      1 deliveries of another payload, refused\n")
	require.Contains(t, out, "payload_sha256 "+w.ConflictHash+"  message "+w.ConflictMessageID)
	require.Contains(t, out, "where:          done: its effect was applied at ")
	require.Contains(t, out, "queue:          orders.fifo  3 visible, 0 in flight, 0 delayed")
	require.Contains(t, out, "dlq searched:   3 messages of orders-dlq.fifo read (received, made visible again, none deleted)\n")

	out, err = run(inspectArgs{key: w.StuckKeys[0]})
	require.NoError(t, err)
	require.NotContains(t, out, "dlq searched")
	require.Contains(t, out, "where:          its worker stopped: the message is in its queue, taken over at its next delivery, or in its DLQ if it ran out of receives\n")

	_, err = run(inspectArgs{queue: w.Queue, dedupID: "order-9999", dlqSearch: 100})
	require.ErrorContains(t, err, "never claimed: not in orders-dlq.fifo (3 messages read)")
	n, err := w.DLQDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "inspect moved nothing")

	// A delivery the worker moved to the DLQ, found by the message id its
	// log line names: its record is its key's (not the id's).
	m := effect.Message{QueueURL: w.Queue, QueueName: "orders.fifo", ID: w.ConflictMessageID, Group: w.DoneGroup, DedupID: w.DoneDedupID, Body: "amended"}
	in, err := sqsmsg.DeadLetterCopy(w.DLQ, true, m, &m.Body, nil, errors.New("conflict"), now)
	require.NoError(t, err)
	_, err = w.SQS.SendMessage(ctx, in)
	require.NoError(t, err)
	out, err = run(inspectArgs{queue: w.Queue, group: w.DoneGroup, messageID: m.ID, dlqSearch: 100})
	require.NoError(t, err)
	require.Contains(t, out, "key:            "+w.DoneKey+"\n")
	require.Contains(t, out, "status:         COMPLETED\n")
	require.Contains(t, out, "where:          in the dead-letter queue orders-dlq.fifo since ")
}
