package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// sdkConfig points the real SDK clients at url with retries off, so that
// each injected error reaches the caller as the SDK decodes it.
func sdkConfig(url string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  aws.AnonymousCredentials{},
		BaseEndpoint: aws.String(url),
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
	}
}

func always(f Fault) Decider { return func(string) Fault { return f } }

func TestErrorResponsesAreWhatTheSDKExpects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ddbOp := func(t *testing.T, f Fault, n int) []error {
		u := newUpstream(t)
		p, err := NewProxy("dynamodb", u.srv.Listener.Addr().String(), always(f), nil)
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		db := dynamodb.NewFromConfig(sdkConfig(p.URL()), func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
		var errs []error
		for range n {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}}}},
				{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "b"}}}},
			}})
			errs = append(errs, err)
		}
		require.Zero(t, u.count("TransactWriteItems"), "an error response is never forwarded")
		return errs
	}
	code := func(err error) string {
		var api smithy.APIError
		require.ErrorAs(t, err, &api, "%v", err)
		return api.ErrorCode()
	}

	t.Run("dynamodb tx conflict", func(t *testing.T) {
		err := ddbOp(t, TxConflict, 1)[0]
		var tce *ddbtypes.TransactionCanceledException
		require.ErrorAs(t, err, &tce)
		require.Len(t, tce.CancellationReasons, 2, "one reason per item")
		require.True(t, dedup.IsTransactionConflict(err))
	})
	t.Run("dynamodb throttling alternates", func(t *testing.T) {
		errs := ddbOp(t, Throttle, 2)
		var pte *ddbtypes.ProvisionedThroughputExceededException
		require.ErrorAs(t, errs[0], &pte)
		require.Equal(t, "ThrottlingException", code(errs[1]))
	})
	t.Run("dynamodb 5xx", func(t *testing.T) {
		var ise *ddbtypes.InternalServerError
		require.ErrorAs(t, ddbOp(t, Err500, 1)[0], &ise)
		err := ddbOp(t, Err503, 1)[0]
		require.Equal(t, "ServiceUnavailable", code(err))
		var re interface{ HTTPStatusCode() int }
		require.ErrorAs(t, err, &re)
		require.Equal(t, 503, re.HTTPStatusCode())
	})
	t.Run("sqs", func(t *testing.T) {
		u := newUpstream(t)
		for f, want := range map[Fault]string{Err500: "InternalFailure", Err503: "ServiceUnavailable", Throttle: "RequestThrottled"} {
			p, err := NewProxy("sqs", u.srv.Listener.Addr().String(), always(f), nil)
			require.NoError(t, err)
			c := sqs.NewFromConfig(sdkConfig(p.URL()))
			_, err = c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.URL() + "/q"),
				Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("1"), ReceiptHandle: aws.String("r")}}})
			require.Equal(t, want, code(err), f.String())
			p.Close()
		}
		require.Zero(t, u.count("DeleteMessageBatch"))
	})
}

func TestErrorResponsesKeepTheConnectionAndCalmTurnsThemOff(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, always(Throttle))
	_, err := call(c, p.URL(), "Echo", "a")
	require.ErrorContains(t, err, "status 400")
	p.Calm(true)
	got, err := call(c, p.URL(), "Echo", "ab")
	require.NoError(t, err)
	require.Equal(t, "ba", got)
	p.Calm(false)
	_, err = call(c, p.URL(), "Echo", "a")
	require.Error(t, err)
	require.Equal(t, 1, u.count("Echo"))
	require.Equal(t, 1, u.connections(), "the client kept its connection")
	_, by := p.Totals()
	require.EqualValues(t, 2, by[Throttle])
	require.EqualValues(t, 1, by[Pass])
}

func TestMixedFaultsBurstsAndTxConflicts(t *testing.T) {
	t.Parallel()
	d := MixedFaults(3, FaultRates{ThrotPct: 2, Burst: 4})
	runs, longest, cur := 0, 0, 0
	for range 20000 {
		if d("PutItem") == Throttle {
			if cur == 0 {
				runs++
			}
			cur++
			longest = max(longest, cur)
		} else {
			cur = 0
		}
	}
	require.Positive(t, runs)
	require.GreaterOrEqual(t, longest, 4, "some bursts outlast the SDK's three attempts")

	d = MixedFaults(3, FaultRates{TxPct: 10, Burst: 1})
	tx, other := 0, 0
	for range 1000 {
		if d("TransactWriteItems") == TxConflict {
			tx++
		}
		if d("PutItem") == TxConflict {
			other++
		}
	}
	require.InDelta(t, 100, tx, 40)
	require.Zero(t, other, "only transactions are cancelled")

	a, b := MixedFaults(9, FaultRates{ResetPct: 2, DropPct: 2, Err5xPct: 1, ThrotPct: 1, TxPct: 3, Burst: 4}),
		MixedFaults(9, FaultRates{ResetPct: 2, DropPct: 2, Err5xPct: 1, ThrotPct: 1, TxPct: 3, Burst: 4})
	for i := range 5000 {
		op := []string{"PutItem", "TransactWriteItems", "UpdateItem"}[i%3]
		require.Equal(t, a(op), b(op), "the same seed gives the same faults")
	}
}

func TestSlowResponsesTakeEffectAndComeLate(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, always(Slow))
	p.SetSlow(300 * time.Millisecond)
	start := time.Now()
	got, err := call(c, p.URL(), "Put", "ab")
	require.NoError(t, err)
	require.Equal(t, "ba", got)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Equal(t, 1, u.count("Put"), "forwarded")
	p.Calm(true)
	start = time.Now()
	_, err = call(c, p.URL(), "Put", "ab")
	require.NoError(t, err)
	require.Less(t, time.Since(start), 300*time.Millisecond, "calm turns slow responses off too")
}
