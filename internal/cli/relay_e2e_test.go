package cli_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

func receiveAll(t *testing.T, c *sqs.Client, url string) []string {
	t.Helper()
	var bodies []string
	for {
		// A long poll: a short one may answer empty while messages wait
		// (SQS samples its servers; a loaded emulator answered empty once).
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			_, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
}

// TestRelayCommand runs worker relay against the local stack: worker setup
// makes the outbox table, a producer writes through the library, the relay
// publishes in order and says so on /metrics, worker outbox shows the
// group, and SIGTERM stops it cleanly.
func TestRelayCommand(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	_, url, _ := newQueueAndTable(t, "relay")
	table := testenv.Name("outbox")
	require.Contains(t, runCLI(t, "setup", "--outbox-table", table), "outbox-table "+table)
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })

	ob := outbox.New(db, table)
	for i := 1; i <= 3; i++ {
		require.NoError(t, ob.Write(context.Background(), []outbox.Message{{QueueURL: url, Group: "g", Body: fmt.Sprint("m", i), ID: fmt.Sprint("id-", i)}}))
	}
	require.Contains(t, runCLI(t, "outbox", "--outbox-table", table), "id-1")

	w := startWorker(t, "relay", "--outbox-table", table, "--poll", "50ms", "--metrics-addr", "127.0.0.1:0")
	var bodies []string
	testenv.Eventually(t, 20*time.Second, func() bool {
		bodies = append(bodies, receiveAll(t, sqsc, url)...)
		return len(bodies) >= 3
	}, "the relay publishes the three messages")
	require.Equal(t, []string{"m1", "m2", "m3"}, bodies)
	addr, ok := w.field("serving /healthz, /readyz and /metrics", "addr")
	require.True(t, ok)
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(httpGet(t, fmt.Sprintf("http://%s/metrics", addr)), fmt.Sprintf(`exactly_outbox_published_total{table=%q} 3`, table))
	}, "/metrics counts three publications")
	// The round that published reports the lag it started with; the next,
	// finding nothing, reports 0.
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(httpGet(t, fmt.Sprintf("http://%s/metrics", addr)), fmt.Sprintf(`exactly_outbox_lag_seconds{table=%q} 0`, table))
	}, "/metrics shows no lag once nothing is pending")
	require.Contains(t, runCLI(t, "outbox", "--outbox-table", table), "nothing pending")
	group := runCLI(t, "outbox", "--outbox-table", table, "--queue", url, "--group", "g")
	require.Equal(t, 3, strings.Count(group, "published "), group)
	stopWorker(t, w)
}

// TestOutboxHeldCommands: a group held at a message SQS refused (its
// queue's MaximumMessageSize lowered under it) shows as held in worker
// outbox; worker outbox release publishes it again once the queue takes
// it, worker outbox drop skips the held message of another group.
func TestOutboxHeldCommands(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	ctx := context.Background()
	_, url, _ := newQueueAndTable(t, "held")
	table := testenv.Name("outbox")
	require.Contains(t, runCLI(t, "setup", "--outbox-table", table), "outbox-table "+table)
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	big := strings.Repeat("x", 4096)
	ob := outbox.New(db, table)
	for _, m := range []outbox.Message{
		{QueueURL: url, Group: "a", Body: "a-" + big, ID: "id-a1"}, {QueueURL: url, Group: "a", Body: "a2", ID: "id-a2"},
		{QueueURL: url, Group: "b", Body: "b-" + big, ID: "id-b1"}, {QueueURL: url, Group: "b", Body: "b2", ID: "id-b2"},
	} {
		require.NoError(t, ob.Write(ctx, []outbox.Message{m}))
	}
	setMax := func(n string) {
		_, err := sqsc.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"MaximumMessageSize": n}})
		require.NoError(t, err)
	}
	setMax("1024")
	relay := &outbox.Relay{DB: db, SQS: sqsc, Table: table}
	round, err := relay.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, round.Held)
	list := runCLI(t, "outbox", "--outbox-table", table)
	require.Equal(t, 2, strings.Count(list, "held: "), list)

	require.Contains(t, runCLI(t, "outbox", "drop", "--outbox-table", table, "--queue", url, "--group", "b", "--id", "id-b1"), "dropped message id-b1")
	setMax("262144")
	out, err := exec.Command(workerBin, "outbox", "release", "--outbox-table", table, "--queue", url, "--group", "a", "--id", "id-a2").CombinedOutput()
	require.Error(t, err, "a2 is not the held message: %s", out)
	require.Contains(t, string(out), "not held")
	require.Contains(t, runCLI(t, "outbox", "release", "--outbox-table", table, "--queue", url, "--group", "a", "--id", "id-a1"), "released group a")
	round, err = relay.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, round.Published, "a1, a2 and b2")
	require.ElementsMatch(t, []string{"a-" + big, "a2", "b2"}, receiveAll(t, sqsc, url))
	require.Contains(t, runCLI(t, "outbox", "--outbox-table", table, "--queue", url, "--group", "b"), "dropped ")
}
