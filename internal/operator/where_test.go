package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/internal/operator"
)

// TestLocate: where a message is now, from its record and a bounded,
// non-destructive search of its queue's DLQ: a dead letter found by its
// key (with the failure reason its copy carries) or its MessageId, a
// completed record not in the DLQ, a stuck one, a search that stopped at
// its bound, and no queue at all (the record alone tells); the DLQ holds
// as many visible messages afterwards.
func TestLocate(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	w, err := consoletest.New(ctx, now)
	require.NoError(t, err)
	locate := func(key, msgID string, bound int) operator.Where {
		t.Helper()
		rec, err := operator.ReadRecord(ctx, w.DB, w.DedupTable, key)
		require.NoError(t, err)
		return operator.Locate(ctx, w.SQS, operator.LocateRequest{QueueURL: w.Queue, Key: key, Namespace: w.Namespace,
			MessageID: msgID, Record: rec, Now: now, Max: bound})
	}
	dlqVisible := func() int {
		qi, err := operator.DescribeQueue(ctx, w.SQS, w.Queue)
		require.NoError(t, err)
		return qi.DLQDepth.Visible
	}

	dead := locate(w.DedupScope.Key("", "order-1410"), "", 50)
	require.NotNil(t, dead.Dead)
	require.Equal(t, "acct-9", dead.Dead.Group)
	require.Equal(t, "effect: payload is not JSON: invalid character 'x'", dead.Dead.Failure)
	require.NotEmpty(t, dead.Dead.FailedAt)
	require.Contains(t, dead.Verdict, "in the dead-letter queue orders-dlq.fifo since ")
	require.Contains(t, dead.Verdict, "payload is not JSON")
	require.Equal(t, 3, dlqVisible(), "the search deleted or hid nothing")

	byID := locate(w.DedupScope.Key("", "no-such-key"), dead.Dead.ID, 50)
	require.NotNil(t, byID.Dead, "found by its MessageId")
	require.Equal(t, dead.Dead.ID, byID.Dead.ID)

	done := locate(w.DoneKey, "", 50)
	require.Nil(t, done.Dead)
	require.Equal(t, 3, done.Searched)
	require.False(t, done.Bounded)
	require.Contains(t, done.Verdict, "done: its effect was applied at ")

	stuck := locate(w.StuckKeys[0], "", 50)
	require.Equal(t, "its worker stopped: not in orders-dlq.fifo (3 messages read); it is in its queue, taken over at its next delivery", stuck.Verdict)

	bounded := locate(w.DedupScope.Key("", "never-sent"), "", 1)
	require.True(t, bounded.Bounded)
	require.Nil(t, bounded.Record)
	require.Contains(t, bounded.Verdict, "never claimed: not among the 1 messages of orders-dlq.fifo read (it holds about 3: the search stops at its bound")

	live, err := operator.ReadRecord(ctx, w.DB, w.DedupTable, w.LiveKey)
	require.NoError(t, err)
	alone := operator.Locate(ctx, w.SQS, operator.LocateRequest{Key: w.LiveKey, Record: live, Now: now, Max: 50})
	require.Zero(t, alone.Searched)
	require.Equal(t, "being processed: a worker holds its claim (the message is in flight)", alone.Verdict)
	require.Equal(t, 3, dlqVisible())

	stuckRec, err := operator.ReadRecord(ctx, w.DB, w.DedupTable, w.StuckKeys[0])
	require.NoError(t, err)
	gone := operator.Locate(ctx, w.SQS, operator.LocateRequest{QueueURL: w.Queue + "-gone", Key: w.StuckKeys[0], Record: stuckRec, Now: now, Max: 50})
	require.NotEmpty(t, gone.SearchErr, "a queue it cannot read is told")
	require.Equal(t, "its worker stopped: the message is in its queue, taken over at its next delivery, or in its DLQ if it ran out of receives", gone.Verdict)
}

func TestKeyQueueName(t *testing.T) {
	require.Equal(t, "orders.fifo", operator.KeyQueueName("exactly#orders.fifo#g#k"))
	require.Equal(t, "q", operator.KeyQueueName("ns#q#k%23x"))
	require.Empty(t, operator.KeyQueueName("plain-key"))
}
