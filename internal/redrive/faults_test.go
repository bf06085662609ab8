package redrive_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// faultySQS wraps the in-memory SQS and fails chosen SendMessageBatch
// entries (by body) or whole calls, recording every batch it is given.
type faultySQS struct {
	*memsqs.Server

	mu sync.Mutex
	// failBody: an entry with this body fails (not sent) with this code.
	failBody map[string]string
	// failCall: the n-th SendMessageBatch call (1-based) fails as a whole;
	// applied says whether it took effect first (its response lost).
	failCall int
	applied  bool
	calls    int
	batches  [][]types.SendMessageBatchRequestEntry
}

var errLost = errors.New("connection reset by peer")

func (f *faultySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.batches = append(f.batches, in.Entries)
	f.mu.Unlock()
	if call == f.failCall {
		if f.applied {
			if _, err := f.Server.SendMessageBatch(ctx, in, opts...); err != nil {
				return nil, err
			}
		}
		return nil, errLost
	}
	var pass []types.SendMessageBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for _, e := range in.Entries {
		if code, ok := f.failBody[aws.ToString(e.MessageBody)]; ok {
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("injected"), SenderFault: false})
			continue
		}
		pass = append(pass, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(pass) > 0 {
		o, err := f.Server.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: pass}, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful, out.Failed = o.Successful, o.Failed
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// bodiesOf drains url (see drain) and returns the bodies per group, in order.
func bodiesOf(t *testing.T, c client, url string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, m := range drain(t, c, url) {
		g := m.Attributes["MessageGroupId"]
		got[g] = append(got[g], aws.ToString(m.Body))
	}
	return got
}

// TestRedriveKeepsAGroupBehindItsFailedMessage: one entry of a
// SendMessageBatch fails. Before the fix, the later messages of its group
// in the same batch were sent, deleted from the DLQ and so replayed ahead
// of it: the group's order inverted. Now no batch carries two messages of
// one group, and a group stops at its failure: the failed message and
// everything after it stay in the DLQ, in order, while other groups move.
func TestRedriveKeepsAGroupBehindItsFailedMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &faultySQS{Server: memsqs.New(), failBody: map[string]string{"A2": "InternalError"}}
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		for _, m := range [][2]string{{"A", "A1"}, {"A", "A2"}, {"B", "B1"}, {"A", "A3"}, {"B", "B2"}, {"A", "A4"}} {
			sendFIFO(t, c, dlq, m[0], m[1], m[1], nil)
		}
		time.Sleep(time.Millisecond)

		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Visibility: 10 * time.Second})
		require.Error(t, err)
		require.Contains(t, err.Error(), "InternalError")
		require.Equal(t, 3, res.Moved, "A1, B1 and B2")

		c.mu.Lock()
		for _, b := range c.batches {
			seen := map[string]bool{}
			for _, e := range b {
				g := aws.ToString(e.MessageGroupId)
				require.False(t, seen[g], "two entries of group %s in one SendMessageBatch", g)
				seen[g] = true
			}
		}
		c.mu.Unlock()

		require.Equal(t, map[string][]string{"A": {"A1"}, "B": {"B1", "B2"}}, bodiesOf(t, c, url), "nothing of group A passed its failed message")
		time.Sleep(10 * time.Second) // what stayed is visible again
		require.Equal(t, map[string][]string{"A": {"A2", "A3", "A4"}}, bodiesOf(t, c, dlq), "the failed message and the rest of its group stay, in order")
	})
}

// TestRedriveWholeBatchErrorDeletesNothing: a SendMessageBatch that fails
// as a whole deletes none of its messages, whether it failed before taking
// effect or took effect and lost its response; a second redrive then moves
// what stayed, in order. A copy that did arrive arrives again (each move's
// copy has a dedup id of its own: TestRedriveAfterAnUnconfirmedCopyKeepsTheGroupsOrder
// says why), with the same key.
func TestRedriveWholeBatchErrorDeletesNothing(t *testing.T) {
	t.Parallel()
	for _, applied := range []bool{false, true} {
		name := map[bool]string{false: "failed before taking effect", true: "took effect, response lost"}[applied]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := &faultySQS{Server: memsqs.New(), failCall: 2, applied: applied}
				url, dlq := testenv.NewQueue(t, c, true, nil, 3)
				for _, m := range [][2]string{{"A", "A1"}, {"A", "A2"}, {"B", "B1"}, {"A", "A3"}} {
					sendFIFO(t, c, dlq, m[0], m[1], m[1], nil)
				}
				time.Sleep(time.Millisecond)

				cfg := redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Visibility: 10 * time.Second}
				res, err := redrive.Run(context.Background(), c, cfg)
				require.ErrorIs(t, err, errLost)
				require.Equal(t, 2, res.Moved, "A1 and B1 went in the first batch")

				time.Sleep(10 * time.Second)
				c.failCall = 0
				cfg.Before = time.Time{}
				res, err = redrive.Run(context.Background(), c, cfg)
				require.NoError(t, err)
				require.Equal(t, 2, res.Moved, "A2 and A3 stayed in the DLQ and move now")
				require.Empty(t, drain(t, c, dlq))
				want := map[string][]string{"A": {"A1", "A2", "A3"}, "B": {"B1"}}
				if applied {
					// The lost batch's copy of A2 arrived; the second move
					// sends A2 again, ahead of A3 (one key: applied once).
					want["A"] = []string{"A1", "A2", "A2", "A3"}
				}
				require.Equal(t, want, bodiesOf(t, c, url))
			})
		})
	}
}

// TestRedriveAfterAnUnconfirmedCopyKeepsTheGroupsOrder: a move's
// SendMessageBatch takes effect and loses its answer, so A2 stays in the DLQ
// while its copy is in the queue; a worker takes the copy, A2 fails again
// and is dead-lettered anew, behind A3. A second move within five minutes
// must put A2 back ahead of A3. Before the fix the copy's dedup id was
// "redrive-<DLQ message id>", the same in both moves: SQS dropped the second
// copy of A2 as a duplicate of the first (already consumed), A3 went in
// first, and A2's new incarnation after it, the group's order inverted.
// Now a copy's dedup id is unique per receive of the DLQ message; a copy
// that arrives twice is the same logical message (same idempotency-key),
// which the ledger applies once.
func TestRedriveAfterAnUnconfirmedCopyKeepsTheGroupsOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &faultySQS{Server: memsqs.New(), failCall: 1, applied: true}
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		sendFIFO(t, c, dlq, "A", "A2", "A2", map[string]types.MessageAttributeValue{"idempotency-key": str("k2")})
		sendFIFO(t, c, dlq, "A", "A3", "A3", map[string]types.MessageAttributeValue{"idempotency-key": str("k3")})
		time.Sleep(time.Millisecond)

		cfg := redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Visibility: 10 * time.Second}
		_, err := redrive.Run(context.Background(), c, cfg)
		require.ErrorIs(t, err, errLost)

		// A worker takes A2's copy; A2 fails again: a new DLQ message.
		copies := drain(t, c, url)
		require.Len(t, copies, 1)
		require.Equal(t, "A2", aws.ToString(copies[0].Body))
		sendFIFO(t, c, dlq, "A", "dlq-again", "A2", copies[0].MessageAttributes)

		time.Sleep(10 * time.Second) // A2 and A3 visible again in the DLQ
		c.failCall = 0
		cfg.Before = time.Time{}
		_, err = redrive.Run(context.Background(), c, cfg)
		require.NoError(t, err)
		got := drain(t, c, url)
		var bodies, keys []string
		for _, m := range got {
			bodies = append(bodies, aws.ToString(m.Body))
			keys = append(keys, aws.ToString(m.MessageAttributes["idempotency-key"].StringValue))
		}
		require.Equal(t, []string{"A2", "A3", "A2"}, bodies, "A2 goes back ahead of A3")
		require.Equal(t, []string{"k2", "k3", "k2"}, keys, "both copies of A2 carry its key: the ledger applies it once")
		require.Empty(t, drain(t, c, dlq))
	})
}
