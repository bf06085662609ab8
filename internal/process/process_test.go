package process_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
)

type bundle struct {
	db     *memdynamo.DB
	store  *dedup.Store
	proc   *process.Processor
	calls  atomic.Int32
	effect func(ctx context.Context, in effect.Input) (effect.Output, error)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := memdynamo.New()
	for _, name := range []string{"dedup", "ledger"} {
		_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		})
		require.NoError(t, err)
	}
	b := &bundle{db: db, store: dedup.NewStore(db, "dedup")}
	b.effect = func(context.Context, effect.Input) (effect.Output, error) {
		return effect.Output{Result: []byte("ok")}, nil
	}
	keys, err := dedup.ParseKeySource("auto")
	require.NoError(t, err)
	b.proc = &process.Processor{
		Store: b.store,
		Effect: effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			b.calls.Add(1)
			return b.effect(ctx, in)
		}),
		Keys:  keys,
		Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "t", Queue: m.QueueName} },
		Lease: 10 * time.Second,
		TTL:   time.Hour,
		Log:   slog.New(slog.DiscardHandler),
	}
	return b
}

func msg(id, body string) effect.Message {
	return effect.Message{QueueName: "q.fifo", ID: id, DedupID: "d-" + id, Group: "g", Body: body, ReceiveCount: 1}
}

func (b *bundle) record(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("dedup"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

// account reads the ledger's item of an account (empty when none).
func (b *bundle) account(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct#" + id}}, ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

func TestWonThenDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
	require.Equal(t, process.Delete, r.Action)
	require.Equal(t, dedup.Won, r.Outcome)
	require.True(t, r.Applied)
	require.Equal(t, "t#q.fifo#d-1", r.Key)
	require.Equal(t, "COMPLETED", b.record(t, r.Key)["status"].(*types.AttributeValueMemberS).Value)

	// A redelivery, or a producer retry with a new MessageId: deleted, not run, result replayed.
	m := msg("1", "body")
	m.ID = "other"
	r = b.proc.Process(context.Background(), m, process.Hooks{})
	require.Equal(t, process.Delete, r.Action)
	require.Equal(t, dedup.Duplicate, r.Outcome)
	require.False(t, r.Applied)
	require.Equal(t, []byte("ok"), r.Result)
	require.EqualValues(t, 1, b.calls.Load())
}

func TestConflictIsPermanentAndNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, process.Delete, b.proc.Process(context.Background(), msg("1", "a"), process.Hooks{}).Action)
	r := b.proc.Process(context.Background(), msg("1", "b"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.Equal(t, dedup.Conflict, r.Outcome)
	require.ErrorContains(t, r.Err, "different payload")
	require.EqualValues(t, 1, b.calls.Load())
}

func TestBusyRetriesAfterRemainingLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.Claim(context.Background(), dedup.ClaimRequest{Key: "t#q.fifo#d-1", PayloadSHA256: dedup.PayloadHash("x"), Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
	require.Equal(t, process.Retry, r.Action)
	require.Equal(t, dedup.Busy, r.Outcome)
	require.InDelta(t, time.Minute.Seconds(), r.After.Seconds(), 2)
	require.Zero(t, b.calls.Load())
}

func TestFailuresReleaseTheClaim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    func() (effect.Output, error)
		action process.Action
		after  time.Duration
	}{
		{"retryable", func() (effect.Output, error) { return effect.Output{}, errors.New("timeout") }, process.Retry, 0},
		{"retry after", func() (effect.Output, error) {
			return effect.Output{}, effect.RetryAfter(7*time.Second, errors.New("429"))
		}, process.Retry, 7 * time.Second},
		{"permanent", func() (effect.Output, error) { return effect.Output{}, effect.Permanent(errors.New("400")) }, process.Fail, 0},
		{"panic", func() (effect.Output, error) { panic("boom") }, process.Retry, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.effect = func(context.Context, effect.Input) (effect.Output, error) { return c.err() }
			r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
			require.Equal(t, c.action, r.Action)
			require.Equal(t, c.after, r.After)
			require.Error(t, r.Err)
			require.False(t, r.Applied)
			rec := b.record(t, r.Key)
			require.Equal(t, "IN_PROGRESS", rec["status"].(*types.AttributeValueMemberS).Value)
			require.Equal(t, "0", rec["lease_until"].(*types.AttributeValueMemberN).Value, "released")
			// The next delivery claims at once and succeeds.
			b.effect = func(context.Context, effect.Input) (effect.Output, error) { return effect.Output{}, nil }
			r = b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
			require.Equal(t, process.Delete, r.Action)
			require.True(t, r.Applied)
		})
	}
}

func TestNoKeyIsPermanentWithoutAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keys, err := dedup.ParseKeySource("attr:order-id")
	require.NoError(t, err)
	b.proc.Keys = keys
	r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.True(t, effect.IsPermanent(r.Err))
	require.ErrorContains(t, r.Err, `"order-id"`)
	require.Zero(t, b.calls.Load())
	require.Zero(t, b.db.Calls()["PutItem"], "no claim written")
}

// TestHeartbeatKeepsTheLease: an effect that runs for several leases keeps
// its claim (another worker is told busy) and the caller's heartbeat runs.
func TestHeartbeatKeepsTheLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		var beats atomic.Int32
		release := make(chan struct{})
		b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
			<-release
			return effect.Output{}, nil
		}
		done := make(chan process.Result)
		go func() {
			done <- b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{
				Lease: 10 * time.Second, HeartbeatEvery: 2 * time.Second,
				Heartbeat: func(context.Context) error { beats.Add(1); return nil },
			})
		}()
		time.Sleep(25 * time.Second) // two and a half leases
		synctest.Wait()
		require.EqualValues(t, 12, beats.Load())
		c, err := b.store.Claim(context.Background(), dedup.ClaimRequest{Key: "t#q.fifo#d-1", PayloadSHA256: dedup.PayloadHash("x"), Lease: time.Second, TTL: time.Hour})
		require.NoError(t, err)
		require.Equal(t, dedup.Busy, c.Outcome, "the lease was extended")
		close(release)
		r := <-done
		require.Equal(t, process.Delete, r.Action)
		require.True(t, r.Applied)
	})
}

// TestZombieTransactionalAppliesNothing: A's lease ends while its effect runs
// (no heartbeat), B takes over and commits; A's transactional commit is
// refused and applies nothing. The ledger shows one application.
func TestZombieTransactionalAppliesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		ledger := &builtin.Ledger{Table: "ledger"}
		stall := make(chan struct{})
		var first atomic.Bool
		b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
			if first.CompareAndSwap(false, true) {
				<-stall // A stalls past its lease
			}
			return ledger.Apply(ctx, in)
		}
		body := `{"account":"a1","amount_cents":250,"seq":1}`
		aDone := make(chan process.Result)
		go func() {
			aDone <- b.proc.Process(context.Background(), msg("1", body), process.Hooks{Lease: 5 * time.Second, HeartbeatEvery: time.Hour})
		}()
		time.Sleep(6 * time.Second) // A's lease is over
		require.True(t, first.Load())
		rb := b.proc.Process(context.Background(), msg("1", body), process.Hooks{})
		require.Equal(t, process.Delete, rb.Action, "B takes over and commits: %v", rb.Err)
		require.True(t, rb.Applied)
		close(stall)
		ra := <-aDone
		require.Equal(t, process.Retry, ra.Action)
		require.True(t, ra.LeaseLost)
		require.ErrorIs(t, ra.Err, dedup.ErrLeaseLost)

		acct := b.account(t, "a1")
		require.Equal(t, "250", acct["balance_cents"].(*types.AttributeValueMemberN).Value)
		require.Equal(t, "1", acct["applied"].(*types.AttributeValueMemberN).Value)
	})
}

func TestEffectConditionIsPermanent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ledger := &builtin.Ledger{Table: "ledger"}
	b.effect = ledger.Apply
	for i, seq := range []int{5, 3} { // seq 3 after 5: refused by last_seq < seq
		r := b.proc.Process(context.Background(), msg(strconv.Itoa(i), `{"account":"a1","amount_cents":1,"seq":`+strconv.Itoa(seq)+`}`), process.Hooks{})
		if i == 0 {
			require.Equal(t, process.Delete, r.Action)
			continue
		}
		require.Equal(t, process.Fail, r.Action)
		var ece *dedup.EffectConditionError
		require.ErrorAs(t, r.Err, &ece)
		require.Equal(t, 0, ece.Index)
	}
}

// TestOversizedResult: in claim mode the effect has run, so the record is
// completed without the result (a redelivery is a duplicate, not a second
// run) and the message fails loudly; in transactional mode nothing is applied.
func TestOversizedResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := make([]byte, dedup.MaxResultBytes+1)
	b.effect = func(context.Context, effect.Input) (effect.Output, error) { return effect.Output{Result: big}, nil }
	r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.True(t, r.Applied)
	require.True(t, effect.IsPermanent(r.Err))
	rec := b.record(t, r.Key)
	require.Equal(t, "COMPLETED", rec["status"].(*types.AttributeValueMemberS).Value)
	require.NotContains(t, rec, "result")
	r = b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
	require.Equal(t, process.Delete, r.Action)
	require.Equal(t, dedup.Duplicate, r.Outcome)
	require.EqualValues(t, 1, b.calls.Load(), "not run again")

	ledger := &builtin.Ledger{Table: "ledger"}
	b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
		out, err := ledger.Apply(ctx, in)
		out.Result = big
		return out, err
	}
	r = b.proc.Process(context.Background(), msg("2", `{"account":"a9","amount_cents":5}`), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.False(t, r.Applied)
	require.ErrorIs(t, r.Err, dedup.ErrResultTooLarge)
	require.Empty(t, b.account(t, "a9"), "nothing applied")
	require.Equal(t, "0", b.record(t, r.Key)["lease_until"].(*types.AttributeValueMemberN).Value, "released")

	// Optimistic: nothing is written at all.
	b.proc.Optimistic = true
	r = b.proc.Process(context.Background(), msg("3", `{"account":"a8","amount_cents":5}`), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.ErrorIs(t, r.Err, dedup.ErrResultTooLarge)
	require.Empty(t, b.account(t, "a8"), "nothing applied")
	require.Nil(t, b.record(t, r.Key))

	// A processor whose MaxResult is raised (the HTTP middleware's: a body
	// and its headers) stores up to dedup.MaxStoredBytes.
	b.proc.MaxResult = dedup.MaxStoredBytes
	r = b.proc.Process(context.Background(), msg("4", `{"account":"a7","amount_cents":5}`), process.Hooks{})
	require.True(t, r.Applied, "err: %v", r.Err)
	require.Equal(t, big, b.record(t, r.Key)["result"].(*types.AttributeValueMemberB).Value)
}

// TestPayloadSource: with a json payload source, a producer's retry that
// re-serialised its JSON and added a timestamp is a duplicate, not a
// conflict; a body that is not JSON is a permanent failure, never claimed.
func TestPayloadSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proc.Payload = dedup.PayloadJSON("/account", "/amount_cents")
	r := b.proc.Process(context.Background(), msg("1", `{"account":"a1","amount_cents":250}`), process.Hooks{})
	require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
	r = b.proc.Process(context.Background(), msg("1", `{"amount_cents": 250, "account": "a1", "sent_at": "10:05"}`), process.Hooks{})
	require.Equal(t, dedup.Duplicate, r.Outcome)
	r = b.proc.Process(context.Background(), msg("1", `{"account":"a1","amount_cents":999}`), process.Hooks{})
	require.Equal(t, dedup.Conflict, r.Outcome)
	r = b.proc.Process(context.Background(), msg("2", `not json`), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.True(t, effect.IsPermanent(r.Err))
	require.Nil(t, b.record(t, r.Key), "never claimed")
	require.EqualValues(t, 1, b.calls.Load())
}
