package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// fakeAPI is a hand-written stub: each method calls its function field.
type fakeAPI struct {
	PutItemFunc            func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	UpdateItemFunc         func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItemsFunc func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ dedup.API = (*fakeAPI)(nil)

func (f *fakeAPI) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return f.PutItemFunc(in)
}

func (f *fakeAPI) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return f.UpdateItemFunc(in)
}

func (f *fakeAPI) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return f.TransactWriteItemsFunc(in)
}

func (f *fakeAPI) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeAPI) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return nil, errors.New("not used")
}

func record(status, token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k"}, "status": &types.AttributeValueMemberS{Value: status},
		"token": &types.AttributeValueMemberS{Value: token}, "payload_sha256": &types.AttributeValueMemberS{Value: "h"},
		"lease_until": &types.AttributeValueMemberN{Value: "0"}, "expires_at": &types.AttributeValueMemberN{Value: "0"},
	}
}

func reason(code string, item map[string]types.AttributeValue) types.CancellationReason {
	return types.CancellationReason{Code: aws.String(code), Item: item}
}

// TestCompleteTxCancellationReasons maps each way a transaction can be
// cancelled: only the record's failed condition is a lost lease, only an
// effect write's failed condition is an EffectConditionError; every other
// reason is a plain (retryable) error.
func TestCompleteTxCancellationReasons(t *testing.T) {
	t.Parallel()
	mine := dedup.Claim{Outcome: dedup.Won, Key: "k", Token: "mine"}
	write := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("ledger"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}}
	cases := []struct {
		name    string
		reasons []types.CancellationReason
		want    string // nil, lost, effect:<index>, error
	}{
		{"taken over", []types.CancellationReason{reason("ConditionalCheckFailed", record("IN_PROGRESS", "theirs")), reason("None", nil), reason("None", nil)}, "lost"},
		{"completed by another", []types.CancellationReason{reason("ConditionalCheckFailed", record("COMPLETED", "theirs")), reason("None", nil), reason("None", nil)}, "lost"},
		{"swept", []types.CancellationReason{reason("ConditionalCheckFailed", nil), reason("None", nil), reason("None", nil)}, "lost"},
		{"lost beats effect", []types.CancellationReason{reason("ConditionalCheckFailed", record("IN_PROGRESS", "theirs")), reason("ConditionalCheckFailed", nil), reason("None", nil)}, "lost"},
		{"our own lost response", []types.CancellationReason{reason("ConditionalCheckFailed", record("COMPLETED", "mine")), reason("ConditionalCheckFailed", nil), reason("None", nil)}, "nil"},
		{"effect condition", []types.CancellationReason{reason("None", nil), reason("None", nil), reason("ConditionalCheckFailed", nil)}, "effect:1"},
		{"record conflict", []types.CancellationReason{reason("TransactionConflict", nil), reason("None", nil), reason("None", nil)}, "error"},
		{"effect conflict", []types.CancellationReason{reason("None", nil), reason("TransactionConflict", nil), reason("None", nil)}, "error"},
		{"throttled", []types.CancellationReason{reason("None", nil), reason("ThrottlingError", nil), reason("None", nil)}, "error"},
		{"capacity", []types.CancellationReason{reason("ProvisionedThroughputExceeded", nil), reason("None", nil), reason("None", nil)}, "error"},
		{"validation", []types.CancellationReason{reason("None", nil), reason("ValidationError", nil), reason("None", nil)}, "invalid"},
		{"reasons do not match items", []types.CancellationReason{reason("None", nil)}, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeAPI{TransactWriteItemsFunc: func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				require.Len(t, in.TransactItems, 3)
				return nil, &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: c.reasons}
			}}
			err := dedup.NewStore(api, "t").CompleteTx(context.Background(), mine, nil, time.Hour, []types.TransactWriteItem{write, write})
			var ece *dedup.EffectConditionError
			switch {
			case c.want == "nil":
				require.NoError(t, err)
			case c.want == "lost":
				require.ErrorIs(t, err, dedup.ErrLeaseLost)
			case strings.HasPrefix(c.want, "effect:"):
				require.ErrorAs(t, err, &ece)
				require.Equal(t, c.want, fmt.Sprint("effect:", ece.Index))
				require.NotErrorIs(t, err, dedup.ErrLeaseLost)
			default:
				require.Error(t, err)
				require.NotErrorIs(t, err, dedup.ErrLeaseLost)
				require.NotErrorAs(t, err, &ece, "%v read as an effect condition", err)
				var tce *types.TransactionCanceledException
				require.ErrorAs(t, err, &tce, "the cause stays inspectable")
				require.Equal(t, c.want == "invalid", errors.Is(err, dedup.ErrInvalid), "permanent only when invalid")
				require.Equal(t, strings.Contains(c.name, "conflict"), dedup.IsTransactionConflict(err))
			}
		})
	}
}

// TestClaimNeverReadsErrorsAsWon: a claim is won only by a successful put.
func TestClaimNeverReadsErrorsAsWon(t *testing.T) {
	t.Parallel()
	req := dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", Lease: time.Second, TTL: time.Hour}
	for name, err := range map[string]error{
		"condition failed without item": &types.ConditionalCheckFailedException{Message: aws.String("failed")},
		"record of unknown status":      &types.ConditionalCheckFailedException{Item: record("WEIRD", "x")},
		"other API error":               &types.ResourceNotFoundException{Message: aws.String("no table")},
		"transport error":               errors.New("connection reset"),
		"context cancelled":             context.Canceled,
	} {
		api := &fakeAPI{PutItemFunc: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, err }}
		c, gotErr := dedup.NewStore(api, "t").Claim(context.Background(), req)
		require.Error(t, gotErr, name)
		require.NotEqual(t, dedup.Won, c.Outcome, name)
	}
	// A record under our own token that is not IN_PROGRESS cannot be ours to
	// run: an error, not a win.
	api := &fakeAPI{}
	api.PutItemFunc = func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		tok := in.Item["token"].(*types.AttributeValueMemberS).Value
		return nil, &types.ConditionalCheckFailedException{Item: record("COMPLETED", tok)}
	}
	_, err := dedup.NewStore(api, "t").Claim(context.Background(), req)
	require.Error(t, err)
}

// TestRequestShape pins the one request each operation sends: a claim is a
// PutItem with the design's condition and ALL_OLD; no operation reads first.
func TestRequestShape(t *testing.T) {
	t.Parallel()
	var put *dynamodb.PutItemInput
	var upd []*dynamodb.UpdateItemInput
	api := &fakeAPI{
		PutItemFunc: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			put = in
			return &dynamodb.PutItemOutput{}, nil
		},
		UpdateItemFunc: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			upd = append(upd, in)
			return &dynamodb.UpdateItemOutput{}, nil
		},
	}
	st := dedup.NewStore(api, "t")
	c, err := st.Claim(context.Background(), dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", Lease: time.Second, TTL: time.Hour})
	require.NoError(t, err)
	require.Equal(t, "attribute_not_exists(#pk) OR #exp < :now_s OR (#st = :inprog AND #lu < :now_ms)", aws.ToString(put.ConditionExpression))
	require.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, put.ReturnValuesOnConditionCheckFailure)
	require.NoError(t, st.Extend(context.Background(), &c, time.Second))
	require.NoError(t, st.Release(context.Background(), c))
	require.NoError(t, st.Complete(context.Background(), c, nil, time.Hour))
	require.Len(t, upd, 3)
	for _, in := range upd[:2] {
		require.Equal(t, "#tok = :tok AND #st = :inprog", aws.ToString(in.ConditionExpression))
	}
	require.Equal(t, "#tok = :tok", aws.ToString(upd[2].ConditionExpression))
	for _, in := range upd {
		require.Equal(t, c.Token, in.ExpressionAttributeValues[":tok"].(*types.AttributeValueMemberS).Value)
	}
}

// TestSDKRetries: throttling and 5xx are retried by the SDK's standard
// retryer; any other error comes back at once and is never read as won.
func TestSDKRetries(t *testing.T) {
	t.Parallel()
	const prefix = "com.amazonaws.dynamodb.v20120810#"
	type resp struct {
		status int
		body   string
	}
	throttled := resp{400, `{"__type":"` + prefix + `ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`}
	capacity := resp{400, `{"__type":"` + prefix + `ProvisionedThroughputExceededException","message":"slow down"}`}
	internal := resp{500, `{"__type":"` + prefix + `InternalServerError","message":"oops"}`}
	unavailable := resp{503, `{"__type":"` + prefix + `ServiceUnavailable","message":"later"}`}
	ok := resp{200, `{}`}
	invalid := resp{400, `{"__type":"` + prefix + `ValidationException","message":"bad request"}`}
	denied := resp{400, `{"__type":"` + prefix + `AccessDeniedException","message":"no"}`}
	completed := resp{400, `{"__type":"` + prefix + `ConditionalCheckFailedException","message":"The conditional request failed",` +
		`"Item":{"pk":{"S":"k"},"status":{"S":"COMPLETED"},"token":{"S":"t"},"payload_sha256":{"S":"h"},"lease_until":{"N":"0"},"expires_at":{"N":"0"},"result":{"B":"cmVzdWx0"}}}`}

	cases := []struct {
		name     string
		script   []resp
		want     string // won, duplicate, error
		attempts int
	}{
		{"throttled then 5xx then ok", []resp{throttled, internal, ok}, "won", 3},
		{"capacity then ok", []resp{capacity, ok}, "won", 2},
		{"503 every time", []resp{unavailable, unavailable, unavailable, unavailable}, "error", 3},
		{"validation is not retried", []resp{invalid, ok}, "error", 1},
		{"access denied is not retried", []resp{denied, ok}, "error", 1},
		{"a failed condition is an answer, not retried", []resp{completed, ok}, "duplicate", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				i := int(n.Add(1)) - 1
				assert.Equal(t, "DynamoDB_20120810.PutItem", r.Header.Get("X-Amz-Target"))
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(c.script[i].status)
				_, _ = io.WriteString(w, c.script[i].body)
			}))
			defer srv.Close()
			// The configuration the worker loads, pointed at the stub, with
			// short backoffs so the test is quick.
			db := dynamodb.NewFromConfig(testenv.Config(t), func(o *dynamodb.Options) {
				o.BaseEndpoint = aws.String(srv.URL)
				o.DisableValidateResponseChecksum = true
				o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, time.Millisecond)
			})
			claim, err := dedup.NewStore(db, "t").Claim(context.Background(), dedup.ClaimRequest{Key: "k", PayloadSHA256: "h", Lease: time.Second, TTL: time.Hour})
			switch c.want {
			case "won":
				require.NoError(t, err)
				require.Equal(t, dedup.Won, claim.Outcome)
			case "duplicate":
				require.NoError(t, err)
				require.Equal(t, dedup.Duplicate, claim.Outcome)
				require.Equal(t, []byte("result"), claim.Record.Result)
			default:
				require.Error(t, err)
				require.NotEqual(t, dedup.Won, claim.Outcome)
			}
			require.Equal(t, c.attempts, int(n.Load()), "attempts")
		})
	}
}

// counter counts requests through SDK middleware: operations as the caller
// made them, and attempts as they went on the wire (after the retryer).
type counter struct {
	mu         sync.Mutex
	operations map[string]int
	attempts   map[string]int
}

func (c *counter) add(ctx context.Context, attempt bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.operations
	if attempt {
		m = c.attempts
	}
	m[awsmiddleware.GetOperationName(ctx)]++
}

func (c *counter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.operations
	for op, n := range c.attempts {
		if ops[op] != n {
			ops["attempts of "+op] = n // only shows up if a retry happened
		}
	}
	c.operations, c.attempts = map[string]int{}, map[string]int{}
	return ops
}

func (c *counter) install(o *dynamodb.Options) {
	c.operations, c.attempts = map[string]int{}, map[string]int{}
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("countOperations",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.add(ctx, false)
				return next.HandleInitialize(ctx, in)
			}), middleware.Before); err != nil {
			return err
		}
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("countAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				c.add(ctx, true)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// TestRequestsPerOperation: each ledger operation is exactly one DynamoDB
// request, whatever its outcome, and nothing is read before a write.
// Counted through SDK middleware on the real client (DynamoDB Local), and by
// the in-memory DynamoDB's own counter.
func TestRequestsPerOperation(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, db dedupcontract.DB, counts func() map[string]int) {
		ctx := context.Background()
		table, ledger := dedupcontract.Table(t, db), dedupcontract.Table(t, db)
		clock := dedupcontract.NewClock()
		st := dedup.NewStore(db, table, dedup.WithClock(clock.Now))
		req := func(key string) dedup.ClaimRequest {
			return dedup.ClaimRequest{Key: key, PayloadSHA256: "h", Lease: time.Minute, TTL: time.Hour}
		}
		one := func(op string) map[string]int { return map[string]int{op: 1} }
		counts()

		c, err := st.Claim(ctx, req("k"))
		require.NoError(t, err)
		require.Equal(t, dedup.Won, c.Outcome)
		require.Equal(t, one("PutItem"), counts(), "claim (won)")

		b, err := st.Claim(ctx, req("k"))
		require.NoError(t, err)
		require.Equal(t, dedup.Busy, b.Outcome)
		require.Equal(t, one("PutItem"), counts(), "claim (busy)")

		require.NoError(t, st.Extend(ctx, &c, time.Minute))
		require.Equal(t, one("UpdateItem"), counts(), "extend")

		require.NoError(t, st.Complete(ctx, c, []byte("r"), time.Hour))
		require.Equal(t, one("UpdateItem"), counts(), "complete")

		d, err := st.Claim(ctx, req("k"))
		require.NoError(t, err)
		require.Equal(t, dedup.Duplicate, d.Outcome)
		require.Equal(t, one("PutItem"), counts(), "claim (duplicate)")

		c2, err := st.Claim(ctx, req("k2"))
		require.NoError(t, err)
		require.NoError(t, st.Release(ctx, c2))
		counts()
		c2, err = st.Claim(ctx, req("k2"))
		require.NoError(t, err)
		require.Equal(t, dedup.Won, c2.Outcome)
		require.Equal(t, one("PutItem"), counts(), "claim (takeover)")

		writes := []types.TransactWriteItem{{Put: &types.Put{TableName: &ledger, Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "e"}}}}}
		require.NoError(t, st.CompleteTx(ctx, c2, nil, time.Hour, writes))
		require.Equal(t, one("TransactWriteItems"), counts(), "complete (transactional)")

		require.ErrorIs(t, st.Release(ctx, c2), dedup.ErrLeaseLost)
		require.Equal(t, one("UpdateItem"), counts(), "release (lost)")
	}
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		db := memdynamo.New()
		var last map[string]int
		run(t, db, func() map[string]int {
			now := db.Calls()
			diff := map[string]int{}
			for op, n := range now {
				if d := n - last[op]; d > 0 && op != "CreateTable" && op != "UpdateTimeToLive" {
					diff[op] = d
				}
			}
			last = now
			return diff
		})
	})
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		var c counter
		db := testenv.DynamoDB(t, c.install)
		run(t, db, c.reset)
	})
}
