package cli_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestTracesReachTheCollector: the worker binary, with OTEL_* pointing at
// a collector, exports a span per message, in the producer's trace (its
// traceparent message attribute), under the service name it is given.
func TestTracesReachTheCollector(t *testing.T) {
	ctx := context.Background()
	sqsc := testenv.SQS(t)
	queue, url, table := newQueueAndTable(t, "otel")
	col := &cli.Collector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d1"),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{"traceparent": {
			DataType: aws.String("String"), StringValue: aws.String("00-" + traceID + "-00f067aa0ba902b7-01")}}})
	require.NoError(t, err)

	cmd := exec.Command(workerBin, "run", "--queue", url, "--table", table, "--effect", "noop",
		"--metrics-addr", "", "--progress", "0", "--wait-time", "1s")
	cmd.Env = append(os.Environ(), "AWS_REGION=us-east-1", "WORKER_LOG_FORMAT=json",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=orders-worker")
	w := startProc(t, cmd, "worker")

	tid, err := hex.DecodeString(traceID)
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, func() bool {
		got := col.Received()
		return bytes.Contains(got, []byte("process "+queue)) && bytes.Contains(got, tid)
	}, "the message's span at the collector, in the producer's trace")
	got := col.Received()
	require.Contains(t, string(got), "orders-worker", "the service name from OTEL_SERVICE_NAME")
	require.Contains(t, string(got), "exactly.dedup_key")

	// worker send, traced too, starts the trace the worker continues.
	sendCmd := exec.Command(workerBin, "send", "--queue", url, "--group", "g2", "--body", "hi")
	sendCmd.Env = append(os.Environ(), "AWS_REGION=us-east-1", "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL)
	sent, err := sendCmd.CombinedOutput()
	require.NoError(t, err, string(sent))
	var send *tracepb.Span
	testenv.Eventually(t, 30*time.Second, func() bool {
		spans := col.Spans(t)
		for _, s := range spans {
			if s.Name == "send "+queue {
				send = s
			}
		}
		if send == nil {
			return false
		}
		for _, s := range spans {
			if s.Name == "process "+queue && bytes.Equal(s.ParentSpanId, send.SpanId) {
				require.Equal(t, send.TraceId, s.TraceId)
				require.Equal(t, tracepb.Span_SPAN_KIND_PRODUCER, send.Kind)
				require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, s.Kind)
				return true
			}
		}
		return false
	}, "the worker's span a child of worker send's")

	stopWorker(t, w)
}
