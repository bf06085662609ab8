package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestLambdaCommandLine: lambda's own settings and errors, before any AWS call.
func TestLambdaCommandLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  func(string) (string, bool)
		want string
	}{
		{"outside Lambda", []string{"lambda", "--effect", "noop"}, env(), "AWS_LAMBDA_RUNTIME_API is not set"},
		{"bad fail-rest", []string{"lambda", "--effect", "noop"}, env("WORKER_FIFO_FAIL_REST", "all"), `--fifo-fail-rest (WORKER_FIFO_FAIL_REST) "all": want group`},
		{"bad dedup scope", []string{"lambda", "--effect", "noop", "--dedup-scope", "messagegroup"}, env(), `--dedup-scope (WORKER_DEDUP_SCOPE) "messagegroup": want queue`},
		{"zero concurrency", []string{"lambda", "--effect", "noop"}, env("WORKER_CONCURRENCY", "0"), "--concurrency (WORKER_CONCURRENCY) must be at least 1"},
		{"queue not a URL", []string{"lambda", "--effect", "noop", "--queue", "orders.fifo"}, env(), "is not a queue URL"},
		{"run-only flag", []string{"lambda", "--effect", "noop", "--shutdown-timeout", "1s"}, env(), "-shutdown-timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, ExitConfig, run(builtins(), c.args, &stdout, &stderr, c.env), "stderr: %s", stderr.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
			require.Contains(t, stderr.String(), c.want)
		})
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitOK, run(builtins(), []string{"lambda", "--help"}, &stdout, &stderr, env()))
	for _, want := range []string{"WORKER_FIFO_FAIL_REST", "WORKER_DEDUP_SCOPE", "WORKER_QUEUES", "WORKER_EFFECT", "WORKER_MOVE_TO_DLQ", "(default 10)"} {
		require.Contains(t, stderr.String(), want)
	}
	require.NotContains(t, stderr.String(), "WORKER_SHUTDOWN_TIMEOUT")
	stdout.Reset()
	require.Equal(t, ExitOK, run(builtins(), []string{"help"}, &stdout, &stderr, env()))
	require.Contains(t, stdout.String(), "\n  lambda ")
}

// initErrorServer is the init/error endpoint of a Runtime API.
func initErrorServer(t *testing.T) (addr string, posted <-chan map[string]any) {
	ch := make(chan map[string]any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/2018-06-01/runtime/init/error" {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		assert.NoError(t, json.Unmarshal(b, &body))
		body["header"] = r.Header.Get("Lambda-Runtime-Function-Error-Type")
		ch <- body
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), ch
}

// TestNoArgumentsOnLambdaMeansLambda: started as bootstrap (no arguments)
// with AWS_LAMBDA_RUNTIME_API set, the worker runs lambda; its init error is
// posted to the Runtime API and printed as one line.
func TestNoArgumentsOnLambdaMeansLambda(t *testing.T) {
	t.Parallel()
	addr, posted := initErrorServer(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitConfig, run(builtins(), nil, &stdout, &stderr, env("AWS_LAMBDA_RUNTIME_API", addr)))
	require.Equal(t, "worker: --effect (WORKER_EFFECT) is required: one of http, ledger, noop\n", stderr.String())
	select {
	case body := <-posted:
		require.Equal(t, "worker: --effect (WORKER_EFFECT) is required: one of http, ledger, noop", body["errorMessage"])
		require.Equal(t, "ConfigError", body["errorType"])
		require.Equal(t, "Runtime.ConfigInvalid", body["header"])
	case <-time.After(5 * time.Second):
		t.Fatal("no init error posted")
	}
}

// TestLambdaInit goes through the init against the local stack: the queue's
// DeduplicationScope read at cold start must agree with --dedup-scope, and a
// good init hands the runtime loop a handler that works.
func TestLambdaInit(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db, true)
	url, _ := testenv.NewQueue(t, sqsc, true, nil, 0)
	addr, posted := initErrorServer(t)
	lookup := func(k string) (string, bool) {
		if k == "AWS_LAMBDA_RUNTIME_API" {
			return addr, true
		}
		if strings.HasPrefix(k, "WORKER_") {
			return "", false
		}
		return os.LookupEnv(k)
	}
	t.Setenv("AWS_REGION", "us-east-1")

	var stdout, stderr bytes.Buffer
	code := run(builtins(), []string{"lambda", "--effect", "noop", "--table", table, "--queue", url, "--dedup-scope", "group"}, &stdout, &stderr, lookup)
	require.Equal(t, ExitConfig, code, stderr.String())
	require.Contains(t, stderr.String(), "--dedup-scope (WORKER_DEDUP_SCOPE) group contradicts queue")
	require.Contains(t, (<-posted)["errorMessage"], "contradicts")

	// Success: the runtime loop gets the handler (here it is called once
	// instead of serving the Runtime API).
	var resp events.SQSEventResponse
	started := false
	saved := startLambda
	t.Cleanup(func() { startLambda = saved })
	startLambda = func(ctx context.Context, handler any) {
		h := handler.(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error))
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		resp, err = h(ctx, events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: "m1", Body: "{}", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + url[strings.LastIndexByte(url, '/')+1:],
			Attributes: map[string]string{"MessageGroupId": "g", "MessageDeduplicationId": "d1", "ApproximateReceiveCount": "1"},
		}}})
		require.NoError(t, err)
		started = true
	}
	stderr.Reset()
	code = run(builtins(), []string{"lambda", "--effect", "noop", "--table", table, "--queue", url, "--log-format", "json"}, &stdout, &stderr, lookup)
	require.Equal(t, ExitOK, code, stderr.String())
	require.True(t, started)
	require.Empty(t, resp.BatchItemFailures)
	require.Contains(t, stderr.String(), `"msg":"lambda worker ready"`)
	require.Contains(t, stderr.String(), `"applied":1`)
	require.Contains(t, stderr.String(), `"tracing":false`)

	// With OTEL_* set, the invocation's spans reach the collector before
	// it answers (Lambda may freeze the environment right after).
	col := &Collector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	started = false
	stderr.Reset()
	code = run(builtins(), []string{"lambda", "--effect", "noop", "--table", table, "--queue", url, "--log-format", "json"}, &stdout, &stderr, lookup)
	require.Equal(t, ExitOK, code, stderr.String())
	require.True(t, started)
	require.Contains(t, stderr.String(), `"tracing":true`)
	require.Contains(t, string(col.Received()), "process "+url[strings.LastIndexByte(url, '/')+1:], "flushed within the invocation")
}
