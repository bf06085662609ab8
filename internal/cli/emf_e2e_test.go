package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestMetricsFormatEMF: worker run --metrics-format emf writes the EMF
// lines on stdout (here every second, and once when drained) and serves
// no /metrics; /healthz stays.
func TestMetricsFormatEMF(t *testing.T) {
	sqsc := testenv.SQS(t)
	queue, url, table := newQueueAndTable(t, "emf")
	for _, body := range []string{"a", "b"} {
		_, err := sqsc.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(body)})
		require.NoError(t, err)
	}
	cmd := exec.Command(workerBin, "run", "--queue", url, "--table", table, "--effect", "noop", "--metrics-addr", "127.0.0.1:0",
		"--progress", "0", "--wait-time", "1s", "--metrics-format", "emf", "--emf-interval", "1s", "--emf-namespace", "orders")
	cmd.Env = append(os.Environ(), "AWS_REGION=us-east-1", "WORKER_LOG_FORMAT=json")
	var stdout testenv.SyncBuffer
	cmd.Stdout = &stdout
	w := startProc(t, cmd, "worker")
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(stdout.String(), `"Applied":2`) || strings.Count(stdout.String(), `"Applied":1`) == 2
	}, "the EMF lines count both messages")
	require.Contains(t, stdout.String(), `"Namespace":"orders"`)
	require.Contains(t, stdout.String(), `"Queue":"`+queue+`"`)

	addr, ok := w.field("serving /healthz, /readyz and /metrics", "addr")
	require.True(t, ok)
	resp, err := http.Get("http://" + addr.(string) + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "emf alone: nothing to scrape")
	require.Contains(t, httpGet(t, "http://"+addr.(string)+"/healthz"), "ok")

	stopWorker(t, w)
}

// TestNotReadyWhileDraining: from SIGTERM until the worker exits, /readyz
// answers 503 (a load balancer stops sending it work) and /healthz 200 (it
// is not killed as dead). The drain is held open by an effect in flight: an
// http effect whose endpoint answers only when the test lets it (an idle
// worker's stop ends at once, its long polls abandoned).
func TestNotReadyWhileDraining(t *testing.T) {
	sqsc := testenv.SQS(t)
	_, url, table := newQueueAndTable(t, "drain")
	entered, release := make(chan struct{}, 1), make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}))
	t.Cleanup(endpoint.Close)
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	w := startWorker(t, "run", "--queue", url, "--table", table, "--effect", "http", "--http-url", endpoint.URL,
		"--metrics-addr", "127.0.0.1:0", "--progress", "0", "--wait-time", "5s")
	addr := readyAddr(t, w)
	_, err := sqsc.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("{}"),
		MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")})
	require.NoError(t, err)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the effect did not start")
	}
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	testenv.Eventually(t, 5*time.Second, func() bool { return status(addr, "/readyz") == http.StatusServiceUnavailable }, "503 once draining")
	require.Equal(t, http.StatusOK, status(addr, "/healthz"), "still alive while draining")
	select {
	case err := <-w.done:
		t.Fatalf("exited with the effect in flight: %v", err)
	default:
	}
	let()
	select {
	case err := <-w.done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not exit after its drain")
	}
}

// readyAddr waits until w's /readyz answers 200 (its start-up checks
// passed) and returns the address it serves /healthz, /readyz and /metrics
// on.
func readyAddr(t *testing.T, w *proc) string {
	t.Helper()
	var addr string
	testenv.Eventually(t, 30*time.Second, func() bool {
		a, ok := w.field("serving /healthz, /readyz and /metrics", "addr")
		if ok {
			addr = a.(string)
		}
		return ok && status(addr, "/readyz") == http.StatusOK
	}, "ready after the start-up checks")
	return addr
}

// status is the HTTP status of GET addr+path, or 0 when nothing answers.
func status(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
