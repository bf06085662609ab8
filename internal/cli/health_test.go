package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/stretchr/testify/require"
)

func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitOK, run(builtins(), []string{"healthcheck", "--metrics-addr", port}, &stdout, &stderr, env()), stderr.String())
	require.Contains(t, stdout.String(), "healthy")
	require.Equal(t, ExitOK, run(builtins(), []string{"healthcheck", "--path", "/readyz"}, &stdout, &stderr, env("WORKER_METRICS_ADDR", port)))

	mu.Lock()
	status = http.StatusServiceUnavailable
	mu.Unlock()
	stderr.Reset()
	require.Equal(t, ExitError, run(builtins(), []string{"healthcheck", "--metrics-addr", port}, &stdout, &stderr, env()))
	require.Contains(t, stderr.String(), "503")

	srv.Close()
	require.Equal(t, ExitError, run(builtins(), []string{"healthcheck", "--metrics-addr", port}, &stdout, &stderr, env()), "nothing listening")
	require.Equal(t, ExitConfig, run(builtins(), []string{"healthcheck", "--metrics-addr", "nonsense"}, &stdout, &stderr, env()))
}

// TestReadyOnlyAfterStartupChecks: while the start-up checks run (here SQS
// holds the first call), /healthz answers and /readyz does not: ECS and a
// load balancer must not count a worker that may yet fail its checks.
func TestReadyOnlyAfterStartupChecks(t *testing.T) {
	release := make(chan struct{})
	aws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no such queue"}`))
	}))
	defer aws.Close()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open() // also when a check fails
	pointAWSAt(t, aws.URL)
	stderr := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runCommand(context.Background(), nil, builtins(), []string{"--queue", aws.URL + "/1/q.fifo", "--effect", "noop",
			"--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, io.Discard, stderr, env())
	}()
	var addr string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving /healthz, /readyz and /metrics" {
				addr, _ = rec["addr"].(string)
			}
		}
		return addr != ""
	}, 10*time.Second, 10*time.Millisecond, "the health server starts before the checks")
	get := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/healthz"))
	require.Equal(t, http.StatusServiceUnavailable, get("/readyz"), "not ready while the checks run")
	open()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "does not exist")
	case <-time.After(30 * time.Second):
		t.Fatal("runCommand did not return")
	}
}

// TestStopDuringStartupIsGraceful: a SIGTERM while the start-up checks run
// (here SQS holds the first call) ends the command without an error: a
// deploy that stops a task still starting is no failure (the chaos run saw
// exit code 1).
func TestStopDuringStartupIsGraceful(t *testing.T) {
	held := make(chan struct{})
	aws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-held:
		case <-r.Context().Done():
		}
	}))
	defer aws.Close()
	defer close(held)
	pointAWSAt(t, aws.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runCommand(ctx, nil, builtins(), []string{"--queue", aws.URL + "/1/q.fifo", "--effect", "noop", "--metrics-addr", ""}, io.Discard, &testenv.SyncBuffer{}, env())
	}()
	time.Sleep(200 * time.Millisecond) // inside the first start-up call
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("runCommand did not return after the stop")
	}
}

// pointAWSAt sends every AWS call of the process to url (a fake endpoint),
// over the local stack's own variables: the service-specific ones win over
// the general one.
func pointAWSAt(t *testing.T, url string) {
	for _, v := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Setenv(v, url)
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
}
