package exactly_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// counted records how often each body ran.
type counted struct {
	mu  sync.Mutex
	ran map[string]int
}

func (c *counted) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ran == nil {
		c.ran = map[string]int{}
	}
	c.ran[in.Message.Body]++
	return effect.Output{}, nil
}

func (c *counted) runs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.ran {
		out[k] = v
	}
	return out
}

// TestWorkerRunsEachMessageOnce: the public Worker on the in-memory SQS and
// DynamoDB: a burst with duplicates of both kinds (the same dedup id after
// SQS's window, and a new dedup id with the same idempotency-key) runs each
// logical message once, and Run returns once drained after cancellation.
func TestWorkerRunsEachMessageOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		eff := &counted{}
		reg := prometheus.NewRegistry()
		var mu sync.Mutex
		outcomes := map[exactly.Outcome]int{}
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: eff,
			Registerer: reg, WaitTime: time.Second,
			Hooks: exactly.Hooks{Done: func(d exactly.Done) {
				mu.Lock()
				defer mu.Unlock()
				outcomes[d.Outcome]++
			}},
		})
		require.NoError(t, err)
		send := func(group, dedupID, key, body string) {
			in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group, MessageDeduplicationId: &dedupID}
			if key != "" {
				in.MessageAttributes = map[string]sqstypes.MessageAttributeValue{"idempotency-key": {DataType: aws.String("String"), StringValue: &key}}
			}
			_, err := c.SendMessage(context.Background(), in)
			require.NoError(t, err)
		}
		for i := range 20 {
			send(fmt.Sprintf("g%d", i%4), fmt.Sprintf("d%d", i), "", fmt.Sprintf("m%d", i))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		time.Sleep(10 * time.Minute)          // past SQS's five-minute window
		send("g0", "d0", "", "m0")            // the same dedup id again
		send("g1", "fresh", "k-1", "keyed")   // a key ...
		send("g1", "fresh-2", "k-1", "keyed") // ... and the same key under a new dedup id
		time.Sleep(time.Minute)
		cancel()
		require.NoError(t, <-done)
		runs := eff.runs()
		require.Len(t, runs, 21)
		for body, n := range runs {
			require.Equal(t, 1, n, "%s ran once", body)
		}
		st := w.Stats()
		require.EqualValues(t, 21, st.Applied)
		require.EqualValues(t, 2, st.Duplicates)
		require.Equal(t, map[exactly.Outcome]int{exactly.Applied: 21, exactly.Duplicate: 2}, outcomes, "the Done hook saw each message")
		mfs, err := reg.Gather()
		require.NoError(t, err)
		require.NotEmpty(t, mfs, "the worker's metrics are on the caller's registry")
		require.Error(t, w.Run(context.Background()), "a Worker runs once")
	})
}

// TestConfigErrorsNameTheSetting: each bad setting is a *ConfigError that
// names the Config field, before any AWS call.
func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	base := func() exactly.Config {
		return exactly.Config{SQS: memsqs.New(), DynamoDB: memTable(t), Table: "dedup", Effect: &counted{},
			Queues: []string{"https://sqs.eu-west-1.amazonaws.com/1/q.fifo"}}
	}
	cases := []struct {
		setting string
		mutate  func(*exactly.Config)
	}{
		{"SQS", func(c *exactly.Config) { c.SQS = nil }},
		{"Effect", func(c *exactly.Config) { c.Effect = nil }},
		{"Table", func(c *exactly.Config) { c.Table = "" }},
		{"Queues", func(c *exactly.Config) { c.Queues = nil }},
		{"Queues", func(c *exactly.Config) { c.Queues = []string{"orders.fifo"} }},
		{"KeySource", func(c *exactly.Config) { c.KeySource = "header:x" }},
		{"PayloadHash", func(c *exactly.Config) { c.PayloadHash = "sha1" }},
		{"Namespace", func(c *exactly.Config) { c.Namespace = "a#b" }},
		{"TTL", func(c *exactly.Config) { c.TTL = time.Second }},
		{"WaitTime", func(c *exactly.Config) { c.WaitTime = 1500 * time.Millisecond }},
		{"WaitTime", func(c *exactly.Config) { c.WaitTime = 21 * time.Second }}, // past SQS's 20 s long poll
		{"WaitTime", func(c *exactly.Config) { c.WaitTime = 500 * time.Millisecond }},
		{"Lease", func(c *exactly.Config) { c.Lease = time.Second }},
		{"RetryInPlace", func(c *exactly.Config) { c.RetryInPlace = 21 }},
	}
	for _, tc := range cases {
		cfg := base()
		tc.mutate(&cfg)
		_, err := exactly.New(context.Background(), cfg)
		var ce *exactly.ConfigError
		require.ErrorAs(t, err, &ce, tc.setting)
		require.Equal(t, tc.setting, ce.Setting)
		require.Contains(t, err.Error(), "Config."+tc.setting)
	}
	cfg := base()
	cfg.Lambda.FailRest = "all"
	var ce *exactly.ConfigError
	require.ErrorAs(t, cfg.ValidateLambda(), &ce)
	require.Equal(t, "Lambda.FailRest", ce.Setting)
	require.NoError(t, cfg.Validate(), "Lambda settings are not the Worker's")

	// A queue that does not exist is named, with the fix.
	cfg = base()
	cfg.Queues = []string{"https://sqs.eu-west-1.amazonaws.com/1/missing.fifo"}
	_, err := exactly.New(context.Background(), cfg)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Queues", ce.Setting)
	require.Contains(t, ce.Msg, "does not exist: create it")
}

// TestNewWarnsOfADLQWiderThanItsQueue: start-up warns of a FIFO DLQ that
// deduplicates more widely than its queue (a plain FIFO DLQ of a
// high-throughput queue, or one DLQ shared by two queues).
func TestNewWarnsOfADLQWiderThanItsQueue(t *testing.T) {
	t.Parallel()
	start := func(c *memsqs.Server, urls ...string) string {
		var logs bytes.Buffer
		_, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Effect: &counted{}, Queues: urls,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		require.NoError(t, err)
		return logs.String()
	}
	c := memsqs.New()
	plain, _ := memsqs.NewQueue(t, c, true, nil, 5)
	require.NotContains(t, start(c, plain), "deduplicates more widely", "a plain FIFO queue with a plain FIFO DLQ")

	hq, _ := memsqs.NewQueue(t, c, true, highThroughput, 5) // its DLQ is plain FIFO
	logs := start(c, hq)
	require.Contains(t, logs, "dead-letter queue deduplicates more widely than its queue")

	// A second queue with the first one's DLQ.
	attrs, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &plain, AttributeNames: []sqstypes.QueueAttributeName{"RedrivePolicy"}})
	require.NoError(t, err)
	other, _ := memsqs.NewQueue(t, c, true, map[string]string{"RedrivePolicy": attrs.Attributes["RedrivePolicy"]}, 0)
	require.Contains(t, start(c, plain, other), "queues share one FIFO dead-letter queue")
}

// TestConfigAWSMakesTheClients: with Config.AWS, the clients left nil are
// made from it (here they reach a local server that refuses everything, so
// New fails on the queue's attributes, not on a nil client).
func TestConfigAWSMakesTheClients(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no such queue"}`))
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), RetryMaxAttempts: 1}
	_, err := exactly.New(context.Background(), exactly.Config{
		AWS: &cfg, Table: "dedup", Effect: &counted{}, Queues: []string{srv.URL + "/1/q.fifo"},
	})
	var ce *exactly.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Queues", ce.Setting, "the SQS client was made and called: %v", err)
}

// flakyDB fails DescribeTimeToLive with throttling `fails` times (after the
// SDK's own retries, as far as the worker can tell).
type flakyDB struct {
	exactly.DynamoDB
	fails atomic.Int32
	calls atomic.Int32
}

func (f *flakyDB) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	f.calls.Add(1)
	if f.fails.Add(-1) >= 0 {
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	}
	return f.DynamoDB.DescribeTimeToLive(ctx, in, o...)
}

// TestStartupRidesOutTransientErrors: a start-up check that fails with
// throttling or a 5xx is tried again for up to a minute: a service's bad
// minute is no configuration error (the worker used to exit with code 2,
// "fix the setting", and chaos runs saw it).
func TestStartupRidesOutTransientErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		db := &flakyDB{DynamoDB: memTable(t)}
		db.fails.Store(3)
		cfg := exactly.Config{SQS: c, DynamoDB: db, Table: "dedup", Queues: []string{url}, Effect: &counted{}}
		_, err := exactly.New(context.Background(), cfg)
		require.NoError(t, err)
		require.EqualValues(t, 4, db.calls.Load())

		db.fails.Store(1 << 20) // throttled for good
		start := time.Now()
		_, err = exactly.New(context.Background(), cfg)
		require.Error(t, err)
		var ce *exactly.ConfigError
		require.NotErrorAs(t, err, &ce, "not a configuration error: %v", err)
		require.InDelta(t, time.Minute, time.Since(start), float64(10*time.Second), "given up after about a minute")
	})
}

// flakySQS fails GetQueueUrl (the dead-letter queue's lookup) with a 503
// `fails` times.
type flakySQS struct {
	exactly.SQS
	fails atomic.Int32
}

func (f *flakySQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	if f.fails.Add(-1) >= 0 {
		// As the SDK returns it once its retries ran out: the HTTP 503 and
		// the service's error inside.
		return nil, &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusServiceUnavailable}},
			Err:      &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "try later", Fault: smithy.FaultServer},
		}}
	}
	return f.SQS.GetQueueUrl(ctx, in, o...)
}

// TestStartupRidesOutATransientDLQLookup: the dead-letter queue's lookup
// failing with a 503 is no configuration error either (a chaos run saw a
// worker exit with code 2 on it).
func TestStartupRidesOutATransientDLQLookup(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		f := &flakySQS{SQS: c}
		f.fails.Store(2)
		_, err := exactly.New(context.Background(), exactly.Config{SQS: f, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: &counted{}})
		require.NoError(t, err)
		require.Negative(t, f.fails.Load(), "looked up again after the 503s")
	})
}

func TestDoneOutcomes(t *testing.T) {
	t.Parallel()
	// Each outcome as the hook reports it, through a Worker whose effect
	// fails as told.
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		var mu sync.Mutex
		got := map[string][]exactly.Outcome{}
		eff := effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			if in.Message.Body == "poison" {
				return effect.Output{}, effect.Permanent(fmt.Errorf("unreadable"))
			}
			return effect.Output{}, nil
		})
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: eff, WaitTime: time.Second,
			KeySource: "attr:k",
			Hooks: exactly.Hooks{Done: func(d exactly.Done) {
				mu.Lock()
				defer mu.Unlock()
				got[d.Key] = append(got[d.Key], d.Outcome)
			}},
		})
		require.NoError(t, err)
		for i, m := range []struct{ key, body string }{{"a", "x"}, {"b", "poison"}, {"a", "other"}} {
			group, id := "g", fmt.Sprint(i) // one group: handled in this order
			_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(m.body),
				MessageGroupId: &group, MessageDeduplicationId: &id,
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String(m.key)}}})
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Run(ctx))
		key := func(k string) string { return "exactly#" + sqsmsg.QueueName(url) + "#" + k }
		require.Equal(t, map[string][]exactly.Outcome{
			key("a"): {exactly.Applied, exactly.Conflict},
			key("b"): {exactly.Failed},
		}, got)
	})
}

// timeoutDB times out describing the table.
type timeoutDB struct{ exactly.DynamoDB }

func (timeoutDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// TestTableCallFailureIsNoConfigError: a start-up call to the table that
// fails without an answer says nothing about the table: not a ConfigError
// ("fix Config.Table") but the error itself.
func TestTableCallFailureIsNoConfigError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		_, err := exactly.New(context.Background(), exactly.Config{SQS: c, DynamoDB: timeoutDB{memTable(t)}, Table: "dedup", Queues: []string{url}, Effect: &counted{}})
		require.Error(t, err)
		var ce *exactly.ConfigError
		require.NotErrorAs(t, err, &ce, "%v", err)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	})
}

// blocking is an effect that runs until released or cancelled, and says
// which.
type blocking struct {
	started  chan struct{}
	release  chan struct{}
	canceled atomic.Bool
}

func (b *blocking) Apply(ctx context.Context, _ effect.Input) (effect.Output, error) {
	close(b.started)
	select {
	case <-b.release:
		return effect.Output{}, nil
	case <-ctx.Done():
		b.canceled.Store(true)
		return effect.Output{}, ctx.Err()
	}
}

// TestStopThenStopAndCancel: Stop drains gracefully (a running effect goes
// on; Stop's own context bounds the wait, not the drain), and StopAndCancel
// cancels the running effect and returns once Run has.
func TestStopThenStopAndCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		eff := &blocking{started: make(chan struct{}), release: make(chan struct{})}
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: eff, WaitTime: time.Second,
		})
		require.NoError(t, err)
		_, err = c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")})
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		<-eff.started

		short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.ErrorIs(t, w.Stop(short), context.DeadlineExceeded, "the effect is still running")
		require.False(t, eff.canceled.Load(), "a graceful stop lets the effect run")
		select {
		case <-ran:
			t.Fatal("Run returned while its effect ran")
		default:
		}

		start := time.Now()
		require.NoError(t, w.StopAndCancel(context.Background()))
		require.True(t, eff.canceled.Load(), "StopAndCancel cancels the running effect")
		require.Less(t, time.Since(start), 2*time.Second)
		require.NoError(t, <-ran)
	})
}

// TestStopWhenIdleIsPrompt: an idle worker's graceful stop abandons its
// open long poll and returns at once, not within WaitTime; as README.md
// says, a message sent within the abandoned poll's wait is taken by it and
// hidden for its visibility timeout (SQS serves the poll on), then comes
// back: nothing is lost. One sent after that wait is visible at once.
func TestStopWhenIdleIsPrompt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: &counted{}, WaitTime: 10 * time.Second,
		})
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(context.Background()) }()
		// Idle, in the middle of a poll's 10 s (not at an instant one
		// ends and the next begins).
		time.Sleep(time.Minute + 5*time.Second)
		start := time.Now()
		require.NoError(t, w.Stop(context.Background()))
		require.NoError(t, <-ran)
		require.Less(t, time.Since(start), time.Second, "an idle stop waits for no poll")
		send := func(id string) {
			_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(id),
				MessageGroupId: aws.String(id), MessageDeduplicationId: aws.String(id)})
			require.NoError(t, err)
		}
		receive := func() []string {
			out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
			require.NoError(t, err)
			var bodies []string
			for _, m := range out.Messages {
				bodies = append(bodies, aws.ToString(m.Body))
			}
			return bodies
		}
		time.Sleep(time.Second)
		send("within") // inside the abandoned poll's wait
		require.Empty(t, receive(), "taken by the abandoned poll")
		time.Sleep(10 * time.Second)
		send("after")
		require.Equal(t, []string{"after"}, receive())
		time.Sleep(10 * time.Minute)
		// Both visible again (the test received "after" and kept it).
		require.ElementsMatch(t, []string{"within", "after"}, receive(), "back after its visibility timeout")
	})
}

// TestStopBeforeRun: Run returns at once after Stop; Stop on a Worker that
// never ran returns at once.
func TestStopBeforeRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: &counted{}, WaitTime: time.Second,
		})
		require.NoError(t, err)
		require.NoError(t, w.Stop(context.Background()))
		start := time.Now()
		require.NoError(t, w.Run(context.Background()))
		require.Less(t, time.Since(start), 2*time.Second)
	})
}
