package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/internal/telemetry"
	"github.com/exactlyonce/exactly/outbox"
)

// receiveBodies drains url: bodies in delivery order.
func receiveBodies(t *testing.T, c interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}, url string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			require.NotEmpty(t, aws.ToString(m.MessageAttributes["idempotency-key"].StringValue))
			_, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
}

// TestRelayLambdaHandler: a stream batch drains the groups its records
// name; a scheduled event sweeps; each invocation writes one EMF line.
func TestRelayLambdaHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, q := memdynamo.New(), memsqs.New()
	_, err := db.CreateTable(ctx, outboxschema.CreateTableInput("outbox"))
	require.NoError(t, err)
	qo, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q.fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	require.NoError(t, err)
	url := aws.ToString(qo.QueueUrl)
	ob := outbox.New(db, "outbox")
	require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: url, Group: "a", Body: "a1"}, {QueueURL: url, Group: "b", Body: "b1"}}))

	var emf bytes.Buffer
	metrics := telemetry.NewOutboxMetrics(nil, "outbox", &emf, "")
	h := relayLambdaHandler(&outbox.Relay{DB: db, SQS: q, Table: "outbox"}, metrics, slog.New(slog.DiscardHandler))
	stream := fmt.Sprintf(`{"Records":[{"eventSource":"aws:dynamodb","eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":%q},"sk":{"N":"1"}}}}]}`, url+"#a")
	require.NoError(t, h(ctx, json.RawMessage(stream)))
	require.Equal(t, []string{"a1"}, receiveBodies(t, q, url), "the stream named group a only")
	var line map[string]any
	require.NoError(t, json.Unmarshal(emf.Bytes(), &line))
	require.EqualValues(t, 1, line[telemetry.EMFOutboxPublished])
	require.Equal(t, "outbox", line[telemetry.EMFOutboxDimension])
	require.NotContains(t, line, telemetry.EMFOutboxLag, "a drain does not read the index: no lag")

	emf.Reset()
	require.NoError(t, h(ctx, json.RawMessage(`{"version":"0","source":"aws.events","detail-type":"Scheduled Event","detail":{}}`)))
	require.Equal(t, []string{"b1"}, receiveBodies(t, q, url), "the sweep found group b")
	require.NoError(t, json.Unmarshal(emf.Bytes(), &line))
	require.Contains(t, line, telemetry.EMFOutboxLag)

	require.Error(t, h(ctx, json.RawMessage(`[1,2]`)))
}

func TestRelayConfigErrors(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"--poll 1ns":         "worker: --poll (WORKER_RELAY_POLL) 1ns: want 10ms to 1m\n",
		"--retention 1s":     "worker: --retention (WORKER_RELAY_RETENTION) 1s: want 1m to 8760h (365 days)\n",
		"--metrics-format x": "worker: --metrics-format (WORKER_METRICS_FORMAT) \"x\": want prometheus, emf, both\n",
		"--outbox-table=":    "worker: --outbox-table (WORKER_OUTBOX_TABLE) is required: the outbox table's name\n",
		"--per-group 51":     "worker: --per-group (WORKER_RELAY_PER_GROUP) 51: want 1 to 50\n",
		"--group-batch 11":   "worker: --group-batch (WORKER_RELAY_GROUP_BATCH) 11: want 1 to 10\n",
		"--group-batch 0":    "worker: --group-batch (WORKER_RELAY_GROUP_BATCH) 0: want 1 to 10\n",
		"--concurrency 0":    "worker: --concurrency (WORKER_RELAY_CONCURRENCY) 0: want 1 to 1000\n",
		"--concurrency 1001": "worker: --concurrency (WORKER_RELAY_CONCURRENCY) 1001: want 1 to 1000\n",
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, ExitConfig, run(builtins(), append([]string{"relay"}, strings.Fields(args)...), &stdout, &stderr, env()), args)
		require.Equal(t, want, stderr.String(), args)
	}
	// On Lambda, WORKER_COMMAND names the handler.
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitConfig, run(builtins(), nil, &stdout, &stderr, env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:1", "WORKER_COMMAND", "nope")))
	require.Contains(t, stderr.String(), `WORKER_COMMAND "nope": on Lambda, want lambda (the SQS consumer) or relay (the outbox relay)`)
}

func TestNoArgumentsOnLambdaWithWorkerCommandRelay(t *testing.T) {
	t.Parallel()
	addr, posted := initErrorServer(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitConfig, run(builtins(), nil, &stdout, &stderr, env("AWS_LAMBDA_RUNTIME_API", addr, "WORKER_COMMAND", "relay", "WORKER_RELAY_POLL", "1ns")))
	select {
	case body := <-posted:
		require.Equal(t, "worker: --poll (WORKER_RELAY_POLL) 1ns: want 10ms to 1m", body["errorMessage"])
	case <-time.After(5 * time.Second):
		t.Fatal("no init error posted")
	}
}

// TestRelayMetricsShowHeldGroupsAndErrors: a sweep's held groups set the
// held gauge and the EMF line's OutboxHeldGroups (the held-groups alarm's
// metric); errors are counted in both.
func TestRelayMetricsShowHeldGroupsAndErrors(t *testing.T) {
	t.Parallel()
	var emf bytes.Buffer
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewOutboxMetrics(reg, "outbox", &emf, "")
	metrics.Observe(outbox.Round{Groups: 3, Held: 2, Errors: 1, Reordered: 1, Lag: time.Minute}, true)
	require.NoError(t, metrics.Flush(time.Unix(1_800_000_000, 0)))
	var line map[string]any
	require.NoError(t, json.Unmarshal(emf.Bytes(), &line))
	require.EqualValues(t, 2, line[telemetry.EMFOutboxHeld])
	require.EqualValues(t, 1, line[telemetry.EMFOutboxErrors])
	require.EqualValues(t, 1, line[telemetry.EMFOutboxReordered])
	require.Contains(t, fmt.Sprint(line["_aws"]), telemetry.EMFOutboxReordered, "declared as a metric")
	require.Contains(t, fmt.Sprint(line["_aws"]), telemetry.EMFOutboxHeld, "declared as a metric")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	require.Equal(t, 2.0, got["exactly_outbox_held_groups"])
	require.Equal(t, 1.0, got["exactly_outbox_errors_total"])
	require.Equal(t, 1.0, got["exactly_outbox_reordered_total"])
}

// TestRelaySettingsReachTheRelay: each relay flag lands on the
// outbox.Relay the command runs, the defaults included.
func TestRelaySettingsReachTheRelay(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) *relaySettings {
		var s relaySettings
		fs := config.NewSet("worker relay", io.Discard, func(string) (string, bool) { return "", false })
		s.define(fs, false)
		require.NoError(t, fs.Parse(args))
		require.NoError(t, s.validate(fs, false))
		return &s
	}
	r := parse().relay(nil, nil, nil, nil)
	require.Equal(t, outbox.DefaultConcurrency, r.Concurrency)
	require.Equal(t, 10, r.PerGroup)
	require.Equal(t, 1, r.GroupBatch)
	r = parse("--outbox-table", "ob", "--concurrency", "128", "--per-group", "50", "--group-batch", "10", "--poll", "2s", "--retention", "1h").relay(nil, nil, nil, nil)
	require.Equal(t, "ob", r.Table)
	require.Equal(t, 128, r.Concurrency)
	require.Equal(t, 50, r.PerGroup)
	require.Equal(t, 10, r.GroupBatch)
	require.Equal(t, 2*time.Second, r.Poll)
	require.Equal(t, time.Hour, r.Retention)
}
