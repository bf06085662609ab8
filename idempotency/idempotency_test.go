package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/idempotency"
	"github.com/exactlyonce/exactly/internal/memdynamo"
)

// newDB is an in-memory DynamoDB with a dedup table "dedup" and a table
// "orders", both keyed by pk.
// t may be nil (examples): setup errors then panic.
func newDB(t testing.TB) *memdynamo.DB {
	must := func(err error) {
		if t == nil && err != nil {
			panic(err)
		}
		if t != nil {
			t.Helper()
			require.NoError(t, err)
		}
	}
	db := memdynamo.New()
	for _, name := range []string{"dedup", "orders"} {
		_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		})
		must(err)
	}
	_, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("dedup"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	})
	must(err)
	return db
}

func newLedger(t testing.TB, db idempotency.DynamoDB) *idempotency.Ledger {
	t.Helper()
	l, err := idempotency.New(idempotency.Config{DynamoDB: db, Table: "dedup"})
	require.NoError(t, err)
	return l
}

type charge struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
	At     string `json:"at,omitempty"`
}

type receipt struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// charger counts its runs and blocks while gate is set.
type charger struct {
	runs atomic.Int32
	fail atomic.Bool
	gate chan struct{}
}

func (c *charger) charge(ctx context.Context, in charge) (receipt, error) {
	n := c.runs.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.fail.Load() {
		return receipt{}, errors.New("card network unavailable")
	}
	return receipt{ID: "r" + strconv.Itoa(int(n)), Amount: in.Amount}, nil
}

func TestNewNamesTheMissingSetting(t *testing.T) {
	t.Parallel()
	_, err := idempotency.New(idempotency.Config{Table: "dedup"})
	require.ErrorContains(t, err, "Config.DynamoDB")
	_, err = idempotency.New(idempotency.Config{DynamoDB: memdynamo.New()})
	require.ErrorContains(t, err, "Config.Table")

	db := newDB(t)
	require.NoError(t, newLedger(t, db).Check(context.Background()))
	wrong, err := idempotency.New(idempotency.Config{DynamoDB: db, Table: "orders"})
	require.NoError(t, err)
	require.ErrorContains(t, wrong.Check(context.Background()), "expires_at", "orders has no TTL")
}

func TestWrapRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"))
	ctx := context.Background()

	first, err := do(ctx, charge{Order: "o-1", Amount: 250})
	require.NoError(t, err)
	again, err := do(ctx, charge{Order: "o-1", Amount: 250})
	require.NoError(t, err)
	require.Equal(t, first, again, "the stored result is replayed")
	require.EqualValues(t, 1, c.runs.Load())

	_, err = do(ctx, charge{Order: "o-1", Amount: 999})
	require.ErrorIs(t, err, idempotency.ErrPayloadMismatch)
	require.EqualValues(t, 1, c.runs.Load(), "a mismatch is not run")

	other, err := do(ctx, charge{Order: "o-2", Amount: 250})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)
	require.EqualValues(t, 2, c.runs.Load())

	// Another function with the same key runs on its own.
	refund := idempotency.Wrap(l, "refund", c.charge, idempotency.KeyPointers("/order"))
	_, err = refund(ctx, charge{Order: "o-1", Amount: 250})
	require.NoError(t, err)
	require.EqualValues(t, 3, c.runs.Load())
}

func TestWrapDefaultKeyIsTheWholeInput(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	do := idempotency.Wrap(l, "charge", c.charge)
	for range 3 {
		_, err := do(context.Background(), charge{Order: "o-1", Amount: 1})
		require.NoError(t, err)
	}
	_, err := do(context.Background(), charge{Order: "o-1", Amount: 2})
	require.NoError(t, err, "another input is another key")
	require.EqualValues(t, 2, c.runs.Load())
}

func TestFailureReleasesTheKey(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	c.fail.Store(true)
	do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"))
	_, err := do(context.Background(), charge{Order: "o-1", Amount: 1})
	require.ErrorContains(t, err, "card network unavailable", "the function's own error")
	c.fail.Store(false)
	_, err = do(context.Background(), charge{Order: "o-1", Amount: 1})
	require.NoError(t, err, "the retry runs at once, not after the in-progress expiry")
	require.EqualValues(t, 2, c.runs.Load())
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, newDB(t))
		c := &charger{gate: make(chan struct{})}
		do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"))
		done := make(chan error, 1)
		go func() { _, err := do(context.Background(), charge{Order: "o-1", Amount: 1}); done <- err }()
		synctest.Wait()
		time.Sleep(3 * time.Minute) // the heartbeat keeps the claim past its minute
		c2 := &charger{}
		_, err := idempotency.Wrap(l, "charge", c2.charge, idempotency.KeyPointers("/order"))(context.Background(), charge{Order: "o-1", Amount: 1})
		var busy *idempotency.InProgressError
		require.ErrorAs(t, err, &busy)
		require.ErrorIs(t, err, idempotency.ErrInProgress)
		require.Equal(t, 5*time.Second, busy.RetryAfter, "a hint near completion, not the lease's 30 s or more left")
		require.Zero(t, c2.runs.Load())
		close(c.gate)
		require.NoError(t, <-done)
	})
}

// TestKeyMissing: an input without the key its options point at is an
// error (a typo in a pointer must not turn idempotency off), unless
// AllowMissingKey says to run it without idempotency, with a warning.
func TestKeyMissing(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	l, err := idempotency.New(idempotency.Config{DynamoDB: newDB(t), Table: "dedup", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	c := &charger{}
	strict := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/ordre")) // a typo
	_, err = strict(context.Background(), charge{Order: "o-1", Amount: 1})
	require.ErrorIs(t, err, idempotency.ErrKeyMissing)
	require.ErrorContains(t, err, "/ordre")
	require.Zero(t, c.runs.Load(), "not run without idempotency")

	byFunc := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyFunc(func(in charge) string { return in.Order }))
	_, err = byFunc(context.Background(), charge{Amount: 1})
	require.ErrorIs(t, err, idempotency.ErrKeyMissing)
	for range 2 {
		_, err = byFunc(context.Background(), charge{Order: "o-9", Amount: 1})
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, c.runs.Load())

	lenient := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.AllowMissingKey())
	for range 2 {
		_, err := lenient(context.Background(), charge{Amount: 1})
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, c.runs.Load(), "allowed: without a key, every call runs")
	require.Equal(t, 2, strings.Count(logs.String(), "level=WARN msg=\"no idempotency key in the input; running without idempotency\""), logs.String())
}

// TestNilLoggerIsTheDefault: without Config.Logger, warnings go to
// slog.Default(), not nowhere. Not parallel: it sets the default logger.
func TestNilLoggerIsTheDefault(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	l := newLedger(t, newDB(t))
	c := &charger{}
	_, err := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.AllowMissingKey())(context.Background(), charge{})
	require.NoError(t, err)
	require.Contains(t, logs.String(), "no idempotency key in the input")
}

func TestValidatePointers(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.ValidatePointers("/amount"))
	_, err := do(context.Background(), charge{Order: "o-1", Amount: 5, At: "10:00"})
	require.NoError(t, err)
	_, err = do(context.Background(), charge{Order: "o-1", Amount: 5, At: "10:01"})
	require.NoError(t, err, "a retry that only changed an unvalidated field is a duplicate")
	_, err = do(context.Background(), charge{Order: "o-1", Amount: 6, At: "10:01"})
	require.ErrorIs(t, err, idempotency.ErrPayloadMismatch)
	require.EqualValues(t, 1, c.runs.Load())

	loose := idempotency.Wrap(l, "loose", c.charge, idempotency.KeyPointers("/order"), idempotency.NoValidation())
	_, err = loose(context.Background(), charge{Order: "o-1", Amount: 5})
	require.NoError(t, err)
	r, err := loose(context.Background(), charge{Order: "o-1", Amount: 6})
	require.NoError(t, err)
	require.Equal(t, 5, r.Amount, "the stored result, whatever the payload")
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, newDB(t))
		c := &charger{}
		do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.Expiry(10*time.Minute))
		_, err := do(context.Background(), charge{Order: "o-1", Amount: 1})
		require.NoError(t, err)
		time.Sleep(9 * time.Minute)
		_, err = do(context.Background(), charge{Order: "o-1", Amount: 1})
		require.NoError(t, err)
		require.EqualValues(t, 1, c.runs.Load())
		time.Sleep(2 * time.Minute)
		_, err = do(context.Background(), charge{Order: "o-1", Amount: 1})
		require.NoError(t, err)
		require.EqualValues(t, 2, c.runs.Load(), "an expired record no longer answers")
	})
}

// TestLambdaDeadlineBoundsTheClaim: inside a Lambda invocation the claim
// ends with the invocation, so that a timed-out invocation does not keep the
// retry waiting for a whole in-progress expiry.
func TestLambdaDeadlineBoundsTheClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		db := newDB(t)
		l := newLedger(t, db)
		stuck := make(chan struct{})
		defer close(stuck)
		slow := func(ctx context.Context, in charge) (receipt, error) {
			select {
			case <-stuck:
			case <-ctx.Done():
			}
			return receipt{}, ctx.Err()
		}
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		go func() {
			_, _ = idempotency.Wrap(l, "charge", slow, idempotency.KeyPointers("/order"))(ctx, charge{Order: "o-1"})
		}()
		synctest.Wait()
		c := &charger{}
		do := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"))
		_, err := do(context.Background(), charge{Order: "o-1"})
		var busy *idempotency.InProgressError
		require.ErrorAs(t, err, &busy)
		require.LessOrEqual(t, busy.RetryAfter, 5*time.Second, "the claim ends with the invocation")
		time.Sleep(6 * time.Second)
		_, err = do(context.Background(), charge{Order: "o-1"})
		require.NoError(t, err)
		require.EqualValues(t, 1, c.runs.Load())
	})
}

// TestWrapTxAppliesWritesOnce: the function's DynamoDB writes commit with the
// record; a duplicate applies nothing more, and a write whose condition
// fails applies nothing at all.
func TestWrapTxAppliesWritesOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	l := newLedger(t, db)
	var runs atomic.Int32
	place := func(ctx context.Context, in charge) (string, []types.TransactWriteItem, error) {
		runs.Add(1)
		require.NotEmpty(t, idempotency.Key(ctx))
		return "placed " + in.Order, []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 aws.String("orders"),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}},
			UpdateExpression:          aws.String("ADD amount :a"),
			ConditionExpression:       aws.String("attribute_not_exists(amount) OR amount < :cap"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: strconv.Itoa(in.Amount)}, ":cap": &types.AttributeValueMemberN{Value: "100"}},
		}}}, nil
	}
	do := idempotency.WrapTx(l, "place", place, idempotency.KeyPointers("/order"))
	ctx := context.Background()
	for range 3 {
		out, err := do(ctx, charge{Order: "o-1", Amount: 60})
		require.NoError(t, err)
		require.Equal(t, "placed o-1", out)
	}
	require.Equal(t, "60", total(t, db))
	_, err := do(ctx, charge{Order: "o-2", Amount: 60})
	require.NoError(t, err)
	require.Equal(t, "120", total(t, db))
	_, err = do(ctx, charge{Order: "o-3", Amount: 1})
	require.True(t, effect.IsPermanent(err), "the write's own condition failed: %v", err)
	require.Equal(t, "120", total(t, db), "nothing applied")
	require.EqualValues(t, 3, runs.Load())
}

func total(t *testing.T, db *memdynamo.DB) string {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("orders"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}},
	})
	require.NoError(t, err)
	return out.Item["amount"].(*types.AttributeValueMemberN).Value
}

func TestOversizedResultIsNotReplayed(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	var runs atomic.Int32
	big := func(ctx context.Context, in charge) (string, error) {
		runs.Add(1)
		return fmt.Sprintf("%0*d", idempotency.MaxResultBytes+1, 0), nil
	}
	do := idempotency.Wrap(l, "big", big, idempotency.KeyPointers("/order"))
	out, err := do(context.Background(), charge{Order: "o-1"})
	require.NoError(t, err, "the first caller gets its result")
	require.Len(t, out, idempotency.MaxResultBytes+1)
	_, err = do(context.Background(), charge{Order: "o-1"})
	require.ErrorIs(t, err, idempotency.ErrResultNotStored)
	require.EqualValues(t, 1, runs.Load(), "recorded as done: not run again")
}

// countingDB counts the ledger's writes.
type countingDB struct {
	*memdynamo.DB
	puts, updates, txs atomic.Int32
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.puts.Add(1)
	return c.DB.PutItem(ctx, in, o...)
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	return c.DB.UpdateItem(ctx, in, o...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.txs.Add(1)
	return c.DB.TransactWriteItems(ctx, in, o...)
}

// TestWrapTxOptimistic: with Optimistic, a call is one TransactWriteItems
// (no claim, no complete); a duplicate runs the function but applies
// nothing and gets the stored result; Wrap ignores the option.
func TestWrapTxOptimistic(t *testing.T) {
	t.Parallel()
	db := &countingDB{DB: newDB(t)}
	l := newLedger(t, db)
	var runs atomic.Int32
	place := func(ctx context.Context, in charge) (string, []types.TransactWriteItem, error) {
		runs.Add(1)
		return fmt.Sprint("placed ", in.Order, " run ", runs.Load()), []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 aws.String("orders"),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}},
			UpdateExpression:          aws.String("ADD amount :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: strconv.Itoa(in.Amount)}},
		}}}, nil
	}
	do := idempotency.WrapTx(l, "place", place, idempotency.KeyPointers("/order"), idempotency.Optimistic())
	ctx := context.Background()
	db.puts.Store(0)
	for range 3 {
		out, err := do(ctx, charge{Order: "o-1", Amount: 60})
		require.NoError(t, err)
		require.Equal(t, "placed o-1 run 1", out, "the stored result, also for the duplicates")
	}
	require.Equal(t, "60", total(t, db.DB))
	require.EqualValues(t, 3, runs.Load(), "duplicates ran the function, and their writes were dropped")
	require.EqualValues(t, 3, db.txs.Load(), "one transaction per call")
	require.Zero(t, db.puts.Load(), "no claim")
	require.Zero(t, db.updates.Load(), "no complete")

	// Wrap: the function has effects of its own; the option is ignored.
	var sent atomic.Int32
	send := idempotency.Wrap(l, "send", func(ctx context.Context, in charge) (string, error) {
		sent.Add(1)
		return "sent", nil
	}, idempotency.KeyPointers("/order"), idempotency.Optimistic())
	for range 2 {
		_, err := send(ctx, charge{Order: "o-9"})
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, sent.Load(), "a duplicate never runs a Wrap function")
}

// TestWrapTxTooLargeFailsAtOnce: a function whose writes cannot commit in
// one transaction with the record (100 writes and the record: 101 items
// of DynamoDB's 100) gets a permanent error at once, in both modes, with
// nothing applied; its caller is not held. Before, the commit's plain
// error was retried for the whole commit timeout: a (virtual) minute.
func TestWrapTxTooLargeFailsAtOnce(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]idempotency.Option{nil, {idempotency.Optimistic()}} {
		synctest.Test(t, func(t *testing.T) {
			db := newDB(t)
			l := newLedger(t, db)
			var runs atomic.Int32
			n := 100
			bulk := func(_ context.Context, in charge) (string, []types.TransactWriteItem, error) {
				runs.Add(1)
				writes := make([]types.TransactWriteItem, n)
				for i := range writes {
					writes[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"),
						Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(in.Order, "#", i)}}}}
				}
				return "done", writes, nil
			}
			do := idempotency.WrapTx(l, "bulk", bulk, append(opts, idempotency.KeyPointers("/order"))...)
			start := time.Now()
			_, err := do(context.Background(), charge{Order: "o-1"})
			require.Error(t, err)
			require.True(t, effect.IsPermanent(err), "err: %v", err)
			require.ErrorContains(t, err, "101 items")
			require.ErrorContains(t, err, "at most 100")
			require.Less(t, time.Since(start), time.Second, "the caller was held (virtual time)")
			require.EqualValues(t, 1, runs.Load())
			out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("orders"),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "o-1#0"}}})
			require.NoError(t, err)
			require.Empty(t, out.Item, "nothing applied")

			n = 99
			got, err := do(context.Background(), charge{Order: "o-2"})
			require.NoError(t, err)
			require.Equal(t, "done", got)
		})
	}
}

// TestLambdaOptimisticFallbackLeaseEndsAtTheDeadline: an Optimistic WrapTx
// function that fails runs again under a claim; inside a Lambda invocation
// that claim's lease ends with the invocation, however long the first run
// took.
func TestLambdaOptimisticFallbackLeaseEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		db := newDB(t)
		l := newLedger(t, db)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		var runs int
		var leaseUntil string
		place := func(ctx context.Context, in charge) (string, []types.TransactWriteItem, error) {
			runs++
			if runs == 1 {
				time.Sleep(4 * time.Second)
				return "", nil, errors.New("downstream unavailable")
			}
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String("dedup"), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: idempotency.Key(ctx)}},
			})
			require.NoError(t, err)
			leaseUntil = out.Item["lease_until"].(*types.AttributeValueMemberN).Value
			return "placed", nil, nil
		}
		_, err := idempotency.WrapTx(l, "place", place, idempotency.KeyPointers("/order"), idempotency.Optimistic())(ctx, charge{Order: "o-1"})
		require.NoError(t, err)
		require.Equal(t, 2, runs)
		require.Equal(t, strconv.FormatInt(deadline.UnixMilli(), 10), leaseUntil, "the claim ends with the invocation")
	})
}

// TestValidationChangeTakesOldRecordsAsDuplicates: fingerprints made
// another way (ValidatePointers changed, added or dropped) are not
// compared: a key completed before the change is a duplicate whatever the
// payload, never run again, never a mismatch; a key completed after it is
// validated as configured.
func TestValidationChangeTakesOldRecordsAsDuplicates(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	ctx := context.Background()
	byAmount := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.ValidatePointers("/amount"))
	first, err := byAmount(ctx, charge{Order: "o-1", Amount: 5})
	require.NoError(t, err)

	for _, changed := range []func(context.Context, charge) (receipt, error){
		idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order")), // the whole input
		idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"), idempotency.ValidatePointers("/amount", "/at")),
	} {
		r, err := changed(ctx, charge{Order: "o-1", Amount: 999})
		require.NoError(t, err, "not a mismatch: the fingerprints are not comparable")
		require.Equal(t, first, r, "the stored result")
	}
	require.EqualValues(t, 1, c.runs.Load(), "never run again")

	whole := idempotency.Wrap(l, "charge", c.charge, idempotency.KeyPointers("/order"))
	_, err = whole(ctx, charge{Order: "o-2", Amount: 5})
	require.NoError(t, err)
	_, err = whole(ctx, charge{Order: "o-2", Amount: 6})
	require.ErrorIs(t, err, idempotency.ErrPayloadMismatch, "a record made after the change is validated")
	_, err = byAmount(ctx, charge{Order: "o-2", Amount: 6})
	require.NoError(t, err, "and the change back takes it as a duplicate")
	require.EqualValues(t, 2, c.runs.Load())
}
