package exactlytest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/internal/builtin"
)

// recorder counts calls per body; "retry" and "poison" fail.
type recorder struct{ calls map[string]int }

func (r *recorder) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[in.Message.Body]++
	switch in.Message.Body {
	case "retry":
		return effect.Output{}, errors.New("downstream 503")
	case "poison":
		return effect.Output{}, effect.Permanent(errors.New("unreadable"))
	}
	return effect.Output{Result: []byte("done:" + in.Message.Body)}, nil
}

func TestHarnessOutcomes(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	h := exactlytest.New(t, r)
	first := h.RequireApplied(exactlytest.Msg("a"))
	require.Equal(t, "done:a", string(first.Result))
	dup := h.RequireDuplicate(exactlytest.Msg("a"))
	require.Equal(t, "done:a", string(dup.Result), "the stored result is replayed")
	require.Equal(t, first.Key, dup.Key)

	// The same idempotency-key with another body: a conflict, never run.
	h.RequireApplied(exactlytest.Msg("b", exactlytest.Attr("idempotency-key", "k")))
	c := h.RequireConflict(exactlytest.Msg("c", exactlytest.Attr("idempotency-key", "k")))
	require.Error(t, c.Err)

	h.RequireRetry(exactlytest.Msg("retry"))
	h.RequireRetry(exactlytest.Msg("retry")) // released: it runs again
	p := h.RequireFailed(exactlytest.Msg("poison"))
	require.True(t, effect.IsPermanent(p.Err))
	require.Equal(t, map[string]int{"a": 1, "b": 1, "retry": 2, "poison": 1}, r.calls)
	require.Equal(t, 5, h.Runs())
}

// TestInputCarriesBothKeys: an effect gets the scoped key (the dedup
// record's, the delivery's) in Input.Key and the producer's own in
// Input.DedupKey.
func TestInputCarriesBothKeys(t *testing.T) {
	t.Parallel()
	var got effect.Input
	h := exactlytest.New(t, effect.Func(func(_ context.Context, in effect.Input) (effect.Output, error) {
		got = in
		return effect.Output{}, nil
	}))
	d := h.RequireApplied(exactlytest.Msg("a", exactlytest.Attr("idempotency-key", "order#7")))
	require.Equal(t, "order#7", got.DedupKey, "unscoped, unescaped")
	require.Equal(t, d.Key, got.Key)
	require.Equal(t, "exactly#test.fifo#order%237", got.Key, "namespace, queue, the key escaped")
}

// TestHarnessReportsBusy: a delivery whose key another delivery holds
// (its effect still running) comes to exactly.Busy, the hooks' outcome
// for it, and does not run.
func TestHarnessReportsBusy(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	h := exactlytest.New(t, effect.Func(func(context.Context, effect.Input) (effect.Output, error) {
		close(started)
		<-release
		return effect.Output{}, nil
	}))
	first := make(chan exactlytest.Delivery)
	go func() { first <- h.Deliver(exactlytest.Msg("a")) }()
	<-started
	busy := h.Deliver(exactlytest.Msg("a"))
	close(release)
	require.Equal(t, exactly.Busy, busy.Outcome)
	require.Zero(t, busy.Ran)
	require.Equal(t, exactly.Applied, (<-first).Outcome)
}

func TestHarnessKeyAndPayloadOptions(t *testing.T) {
	t.Parallel()
	h := exactlytest.New(t, &recorder{}, exactlytest.KeySource("json:/order"), exactlytest.PayloadHash("json:/amount"))
	h.RequireApplied(exactlytest.Msg(`{"order":"o-1","amount":5,"at":"10:00"}`))
	h.RequireDuplicate(exactlytest.Msg(`{"order":"o-1","amount":5,"at":"10:01"}`))
	h.RequireConflict(exactlytest.Msg(`{"order":"o-1","amount":6}`))
	h.RequireFailed(exactlytest.Msg(`{"amount":6}`)) // no key

	require.Panics(t, func() { exactlytest.New(&fatalTB{TB: t}, &recorder{}, exactlytest.KeySource("header:x")) })
}

// fatalTB turns Fatal into a panic, to test that the harness fails tests.
type fatalTB struct{ testing.TB }

func (f *fatalTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (f *fatalTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }

func TestRequireFailsOnTheWrongOutcome(t *testing.T) {
	t.Parallel()
	h := exactlytest.New(&fatalTB{TB: t}, &recorder{})
	h.RequireApplied(exactlytest.Msg("a"))
	require.PanicsWithValue(t, `exactlytest: message "a": want applied, got duplicate (err: <nil>)`, func() { h.RequireApplied(exactlytest.Msg("a")) })
	require.Panics(t, func() { h.RequireDuplicate(exactlytest.Msg("new")) })
	require.Panics(t, func() { h.RequireConflict(exactlytest.Msg("other")) })
}

// TestHarnessTransactionalEffect: the ledger effect's writes commit with the
// record, optimistically by default (it is an effect.WritesOnly) or after a
// claim: applied once, whatever is redelivered; a conflict applies nothing.
func TestHarnessTransactionalEffect(t *testing.T) {
	t.Parallel()
	for _, mode := range []exactly.CommitMode{"", exactly.CommitOptimistic, exactly.CommitTransactional} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			db := exactlytest.NewDynamoDB(t)
			exactlytest.CreateTable(t, db, "ledger")
			opts := []exactlytest.Option{exactlytest.WithDynamoDB(db)}
			if mode != "" {
				opts = append(opts, exactlytest.Commit(mode))
			}
			h := exactlytest.New(t, &builtin.Ledger{Table: "ledger"}, opts...)
			m := exactlytest.Msg(`{"account":"a1","amount_cents":250,"seq":1}`)
			h.RequireApplied(m)
			d := h.RequireDuplicate(m)
			require.Equal(t, mode != exactly.CommitTransactional, d.Ran == 1, "optimistic: the duplicate's writes computed, then dropped")
			h.RequireConflict(exactlytest.Msg(`{"account":"a1","amount_cents":999,"seq":1}`, exactlytest.DedupID(m.DedupID)))
			out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct#a1"}},
			})
			require.NoError(t, err)
			require.Equal(t, "250", out.Item["balance_cents"].(*types.AttributeValueMemberN).Value)
		})
	}
	// A commit mode the effect cannot have.
	require.Panics(t, func() { exactlytest.New(&fatalTB{TB: t}, &recorder{}, exactlytest.Commit(exactly.CommitOptimistic)) })
	exactlytest.New(t, &recorder{}, exactlytest.Commit(exactly.CommitClaim))
}

// TestFakesRunAWorker: the kit's SQS and DynamoDB run a whole Worker.
func TestFakesRunAWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { // virtual time: the long polls cost nothing
		s := exactlytest.NewSQS()
		url, dlq := exactlytest.NewQueue(t, s, "orders.fifo", 3)
		require.Contains(t, dlq, "orders-dlq.fifo")
		r := &recorder{}
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: s, DynamoDB: exactlytest.NewDynamoDB(t), Table: exactlytest.Table, Queues: []string{url}, Effect: r, WaitTime: time.Second,
			KeySource: "body", // three sends of one body, three dedup ids: one logical message
		})
		require.NoError(t, err)
		for i := range 3 {
			body, group, id := "x", "g", fmt.Sprint(i)
			_, err := s.SendMessage(context.Background(), sqsSend(url, body, group, id))
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		require.NoError(t, w.Run(ctx))
		require.Equal(t, 1, r.calls["x"])
		require.EqualValues(t, 2, w.Stats().Duplicates)
	})
}

func sqsSend(url, body, group, id string) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group, MessageDeduplicationId: &id}
}
