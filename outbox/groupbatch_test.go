package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/outbox"
)

// batchCounter counts SendMessageBatch requests and their entries.
type batchCounter struct {
	outbox.SQS
	calls, entries atomic.Int64
}

func (c *batchCounter) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.calls.Add(1)
	c.entries.Add(int64(len(in.Entries)))
	return c.SQS.SendMessageBatch(ctx, in, opts...)
}

// hotGroup writes n messages of group "a" to q1: a1 .. an.
func hotGroup(t *testing.T, e *env, n int) []string {
	t.Helper()
	var msgs []outbox.Message
	var want []string
	for i := 1; i <= n; i++ {
		b := fmt.Sprintf("a%d", i)
		msgs = append(msgs, msg(e.q1, "a", b))
		want = append(want, b)
	}
	ob := outbox.New(e.db, e.table)
	for len(msgs) > 0 {
		k := min(len(msgs), 25) // one Write is one transaction
		require.NoError(t, ob.Write(context.Background(), msgs[:k]))
		msgs = msgs[k:]
	}
	return want
}

func TestAHotGroupMovesSeveralMessagesPerRequest(t *testing.T) {
	for _, tc := range []struct {
		groupBatch int
		requests   int64
	}{
		{0, 50}, // the default: one message of a group per request
		{10, 5}, // runs of ten
		{4, 13}, // runs of four
		{50, 5}, // at most SQS's ten entries
	} {
		t.Run(fmt.Sprintf("GroupBatch %d", tc.groupBatch), func(t *testing.T) {
			each(t, func(t *testing.T, e *env) {
				want := hotGroup(t, e, 50)
				c := &batchCounter{SQS: e.sqs}
				r := &outbox.Relay{DB: e.db, SQS: c, Table: e.table, PerGroup: 50, GroupBatch: tc.groupBatch}
				round, err := r.Sweep(context.Background())
				require.NoError(t, err)
				require.Equal(t, 50, round.Published)
				require.Equal(t, tc.requests, c.calls.Load(), "SendMessageBatch requests for 50 messages of one group")
				bodies, _ := e.received(t, e.q1)
				require.Equal(t, want, bodies["a"])
			})
		})
	}
}

// TestAGroupsRunFailingAsASuffixKeepsItsOrder: SQS refuses (retryably) the
// messages of a run from the k-th on; the relay records those before,
// publishes the rest in the next round, and the group arrives in order.
func TestAGroupsRunFailingAsASuffixKeepsItsOrder(t *testing.T) {
	for k := 1; k <= 10; k++ {
		t.Run(fmt.Sprintf("from a%d", k), func(t *testing.T) {
			each(t, func(t *testing.T, e *env) {
				want := hotGroup(t, e, 10)
				fail := map[string]int{}
				for i := k; i <= 10; i++ {
					fail[fmt.Sprintf("a%d", i)] = 1
				}
				f := &faultySQS{sqsAPI: e.sqs, failEntry: fail}
				r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
				round, err := r.Sweep(context.Background())
				require.NoError(t, err)
				require.Equal(t, outbox.Round{Groups: 1, Published: k - 1, Errors: 1, Lag: round.Lag}, round)
				round, err = r.Sweep(context.Background())
				require.NoError(t, err)
				require.Equal(t, 11-k, round.Published)
				require.Zero(t, round.Reordered)
				bodies, _ := e.received(t, e.q1)
				require.Equal(t, want, bodies["a"])
			})
		})
	}
}

// TestAFailedEntryBeforeATakenOneHoldsTheGroup: SQS fails one message of a
// run and takes the later ones (an entry failing inside SQS): the group's
// order is broken at SQS. The relay records the messages before it, holds
// the group at it, counts it, and worker outbox's reason says so; another
// group in the same batch goes on.
func TestAFailedEntryBeforeATakenOneHoldsTheGroup(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		hotGroup(t, e, 5)
		ob := outbox.New(e.db, e.table)
		require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "b", "b1"), msg(e.q1, "b", "b2")}))
		f := &faultySQS{sqsAPI: e.sqs, failEntry: map[string]int{"a3": 1}}
		r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Reordered)
		require.Equal(t, 1, round.Held)
		require.Zero(t, round.Errors, "held, not left for the next round")
		require.Equal(t, 4, round.Published, "a1, a2, b1, b2: a4 and a5 reached SQS ahead of a3 and are not recorded")

		h, held, err := outbox.GroupHeld(ctx, e.db, e.table, e.q1, "a")
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, int64(3), h.Seq)
		require.True(t, strings.HasPrefix(h.Why, outbox.ReorderedHold+": "), h.Why)
		require.Contains(t, h.Why, "InternalError")
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, []string{"a1", "a2", "a4", "a5"}, bodies["a"], "what SQS did: the order is broken there")
		require.Equal(t, []string{"b1", "b2"}, bodies["b"])

		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, round.Published, "a held group waits for an operator")
		require.Equal(t, 1, round.Held)

		require.NoError(t, outbox.Release(ctx, e.db, e.table, e.q1, "a", "id-a3"))
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, round.Published, "a3, and a4 and a5 again")
		bodies, _ = e.received(t, e.q1)
		require.Equal(t, []string{"a3"}, bodies["a"], "SQS drops the copies of a4 and a5 (same dedup ids, within five minutes)")
	})
}

// TestALoweredMaximumMessageSizeRefusesASuffix: an operator lowers the
// queue's MaximumMessageSize under messages the relay runs together. A run
// is cut where a message is smaller than an earlier one over SQS's lowest
// MaximumMessageSize, so SQS refuses a suffix of the run: the group is
// held at the first too-large message, in order, nothing reordered.
func TestALoweredMaximumMessageSizeRefusesASuffix(t *testing.T) {
	ctx := context.Background()
	e := memEnv(t)
	_, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &e.q1, Attributes: map[string]string{"MaximumMessageSize": "2500"}})
	require.NoError(t, err)
	sized := func(name string, n int) outbox.Message {
		return outbox.Message{QueueURL: e.q1, Group: "a", ID: "id-" + name, Body: name + strings.Repeat(".", n-len(name))}
	}
	ob := outbox.New(e.db, e.table)
	// a3 is over the lowered limit; a4 and a5 are under it.
	require.NoError(t, ob.Write(ctx, []outbox.Message{sized("a1", 100), sized("a2", 2000), sized("a3", 3000), sized("a4", 1500), sized("a5", 100)}))
	c := &batchCounter{SQS: e.sqs}
	r := &outbox.Relay{DB: e.db, SQS: c, Table: e.table, GroupBatch: 10}
	round, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, round.Reordered)
	require.Equal(t, 1, round.Held)
	require.Equal(t, 2, round.Published)
	require.Equal(t, int64(3), c.entries.Load(), "one run: a1, a2, a3; a4 is smaller than a3")
	h, _, err := outbox.GroupHeld(ctx, e.db, e.table, e.q1, "a")
	require.NoError(t, err)
	require.Equal(t, int64(3), h.Seq)
	require.Contains(t, h.Why, "InvalidParameterValue")
	bodies, _ := e.received(t, e.q1)
	require.Len(t, bodies["a"], 2)
	require.True(t, strings.HasPrefix(bodies["a"][1], "a2"))
}

// memEnv is an env on the in-memory fakes alone: the fake that holds
// SQS's MaximumMessageSize to AWS's behaviour.
func memEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, memdynamo.New(), memsqs.New())
}

// TestALostAnswerThatHidAReorderIsCaughtByTheSequenceNumbers: SQS refuses
// a3 and takes a4 and a5 in a request whose answer is lost. The relay,
// seeing an error, sends a1 to a5 again: SQS takes a3 now and answers the
// copies of a4 and a5 with their first sequence numbers, below a3's. The
// relay holds the group at a4, the first message SQS had out of order.
func TestALostAnswerThatHidAReorderIsCaughtByTheSequenceNumbers(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		hotGroup(t, e, 5)
		f := &faultySQS{sqsAPI: e.sqs, failEntry: map[string]int{"a3": 1}, lose: 1}
		r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Errors, "the answer was lost: nothing is known")
		require.Zero(t, round.Reordered)

		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Reordered)
		require.Equal(t, 1, round.Held)
		require.Equal(t, 3, round.Published, "a1 and a2 again, and a3")
		h, held, err := outbox.GroupHeld(ctx, e.db, e.table, e.q1, "a")
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, int64(4), h.Seq)
		require.True(t, strings.HasPrefix(h.Why, outbox.ReorderedHold+": SQS had message 4 before message 3"), h.Why)
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, []string{"a1", "a2", "a4", "a5", "a3"}, bodies["a"], "what SQS did")
	})
}
