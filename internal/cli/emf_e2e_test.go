package cli_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
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
