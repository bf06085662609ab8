package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/testenv"
)

var workerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "worker-e2e")
	if err != nil {
		panic(err)
	}
	workerBin = filepath.Join(dir, "worker")
	out, err := exec.Command("go", "build", "-o", workerBin, "github.com/exactlyonce/exactly/cmd/worker").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot build the worker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	// The tests' goroutines must all have ended (goleak): every goroutine
	// has an owner and an exit. The kept-alive connections http.Get left in
	// the default transport (to the workers' health and metrics endpoints)
	// are the tests' own: closed first.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func startWorker(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	cmd.Env = append(os.Environ(), "AWS_REGION=us-east-1", "WORKER_LOG_FORMAT=json")
	return startProc(t, cmd, "worker")
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(workerBin, args...)
	cmd.Env = append(os.Environ(), "AWS_REGION=us-east-1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "worker %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// TestEndToEnd is the thin path against both emulators: the worker binary
// sets up a FIFO queue with a DLQ and the tables, sends a burst with
// duplicates of both kinds and a poison message, applies the ledger effect
// exactly once per logical message, dead-letters the poison message, and on
// SIGTERM exits 0.
func TestEndToEnd(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	ctx := context.Background()
	suffix := testenv.Name("e2e")
	queue, dlq, table, ledger := suffix+".fifo", suffix+"-dlq.fifo", suffix+"-dedup", suffix+"-ledger"

	out := runCLI(t, "setup", "--queue", queue, "--dlq", dlq, "--max-receive", "2", "--visibility", "10s",
		"--table", table, "--ledger-table", ledger)
	// setup is idempotent: a second run changes nothing and prints the same.
	require.Equal(t, out, runCLI(t, "setup", "--queue", queue, "--dlq", dlq, "--max-receive", "2", "--visibility", "10s",
		"--table", table, "--ledger-table", ledger))
	urls := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		urls[f[0]] = f[1]
	}
	url, dlqURL := urls["queue"], urls["dlq"]
	require.NotEmpty(t, url)
	require.NotEmpty(t, dlqURL)
	t.Cleanup(func() {
		for _, u := range []string{url, dlqURL} {
			_, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
		for _, tb := range []string{table, ledger} {
			_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
	})

	// 4 accounts x 6 deposits; then exact resends (dropped by SQS) and
	// retries with the same idempotency-key under a new dedup id (dropped by
	// the ledger); one poison message in its own group.
	var lines []string
	want := map[string]int64{}
	for a := range 4 {
		acct := fmt.Sprintf("acct%d", a)
		for seq := 1; seq <= 6; seq++ {
			amt := int64(100*a + seq)
			want[acct] += amt
			id := fmt.Sprintf("%s-%d", acct, seq)
			body := fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, amt, seq)
			lines = append(lines, fmt.Sprintf(`{"group":%q,"dedup_id":%q,"key":%q,"body":%q}`, acct, id, id, body))
		}
	}
	for a := range 4 {
		acct := fmt.Sprintf("acct%d", a)
		for _, seq := range []int{2, 5} {
			amt := int64(100*a + seq)
			id := fmt.Sprintf("%s-%d", acct, seq)
			body := fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, amt, seq)
			lines = append(lines, fmt.Sprintf(`{"group":%q,"dedup_id":%q,"key":%q,"body":%q}`, acct, id, id, body))          // exact resend
			lines = append(lines, fmt.Sprintf(`{"group":%q,"dedup_id":%q,"key":%q,"body":%q}`, acct, id+"-retry", id, body)) // retry after the window
		}
	}
	lines = append(lines, `{"group":"poison","dedup_id":"poison-1","body":"{\"account\": 7}"}`)
	file := filepath.Join(t.TempDir(), "burst.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	require.Contains(t, runCLI(t, "send", "--queue", url, "--ndjson", file), fmt.Sprintf("sent %d messages", len(lines)))

	w := startWorker(t, "run", "--queue", url, "--effect", "ledger", "--table", table, "--ledger-table", ledger,
		"--metrics-addr", "127.0.0.1:0", "--concurrency", "8", "--progress", "0", "--wait-time", "2s")

	// Balances converge to exactly what was sent once, and stay there.
	testenv.Eventually(t, 60*time.Second, func() bool {
		bs, err := cli.ReadBalances(ctx, db, ledger)
		if err != nil || len(bs) != len(want) {
			return false
		}
		for _, b := range bs {
			if b.BalanceCents != want[b.Account] {
				return false
			}
		}
		return true
	}, "balances to match what was sent once")
	testenv.Eventually(t, 60*time.Second, func() bool { return queueEmpty(t, sqsc, url) }, "the queue to drain")

	bs, err := cli.ReadBalances(ctx, db, ledger)
	require.NoError(t, err)
	for _, b := range bs {
		require.Equal(t, want[b.Account], b.BalanceCents, b.Account)
		require.EqualValues(t, 6, b.Applied, "%s: each deposit applied exactly once", b.Account)
		require.EqualValues(t, 6, b.LastSeq, "%s: applied in group order", b.Account)
	}
	// One COMPLETED record per logical message (24); the poison message's
	// claim was released after each permanent failure.
	recs := scanAll(t, db, table)
	require.Len(t, recs, 25)
	completed := 0
	for _, r := range recs {
		switch st := r["status"].(*ddbtypes.AttributeValueMemberS).Value; st {
		case "COMPLETED":
			completed++
		case "IN_PROGRESS":
			require.Contains(t, r["pk"].(*ddbtypes.AttributeValueMemberS).Value, "#poison-1")
			require.Equal(t, "0", r["lease_until"].(*ddbtypes.AttributeValueMemberN).Value, "released")
		default:
			t.Fatalf("status %q", st)
		}
	}
	require.Equal(t, 24, completed)
	// The poison message is in the DLQ, with its group.
	dl, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &dlqURL, WaitTimeSeconds: 5, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	require.NoError(t, err)
	require.Len(t, dl.Messages, 1)
	require.Equal(t, `{"account": 7}`, aws.ToString(dl.Messages[0].Body))
	_, err = sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &dlqURL, ReceiptHandle: dl.Messages[0].ReceiptHandle})
	require.NoError(t, err)

	// A dry run lists it, with its key and why it failed (the worker's
	// copy carries the reason), and moves nothing.
	listing := runCLI(t, "redrive", "--dlq", dlqURL, "--queue", url, "--dry-run")
	require.Contains(t, listing, "poison")
	require.Contains(t, listing, "poison-1")
	require.Contains(t, listing, "ledger body is not the expected JSON object")
	require.Contains(t, listing, "dry run: would move 1 messages from "+dlq+" to "+queue)

	// worker redrive moves it back, with its group and its dedup key; it
	// fails again and is dead-lettered again, keeping that key.
	// (It may also see the copy come back, failed again: it leaves that.)
	require.True(t, strings.HasPrefix(runCLI(t, "redrive", "--dlq", dlqURL, "--queue", url), "moved 1 messages from "+dlq+" to "+queue))
	var again []sqstypes.Message
	testenv.Eventually(t, 30*time.Second, func() bool {
		out, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &dlqURL, WaitTimeSeconds: 1, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		require.NoError(t, err)
		again = out.Messages
		return len(again) > 0
	}, "the replayed poison message back in the DLQ")
	require.Len(t, again, 1)
	require.Equal(t, `{"account": 7}`, aws.ToString(again[0].Body))
	require.Equal(t, "poison", again[0].Attributes["MessageGroupId"])
	require.True(t, strings.HasPrefix(again[0].Attributes["MessageDeduplicationId"], "dlq-"),
		"the worker's move gives the copy a dedup id of its own (sqsmsg.CopyDeduplicationID)")
	require.Equal(t, "poison-1", aws.ToString(again[0].MessageAttributes["idempotency-key"].StringValue), "the dedup key kept")
	require.Contains(t, aws.ToString(again[0].MessageAttributes["exactly-failure"].StringValue), "ledger body is not the expected JSON object", "why, on the copy")
	_, err = time.Parse(time.RFC3339, aws.ToString(again[0].MessageAttributes["exactly-failed-at"].StringValue))
	require.NoError(t, err, "when, on the copy")
	require.Len(t, scanAll(t, db, table), 25, "the replay used the same dedup record")

	// The 8 retries were absorbed by the ledger; /metrics says so.
	addr := readyAddr(t, w)
	metrics := httpGet(t, "http://"+addr+"/metrics")
	require.Contains(t, metrics, `exactly_duplicates_total{queue="`+queue+`"} 8`)
	require.Contains(t, metrics, `exactly_effects_applied_total{queue="`+queue+`"} 24`)
	// Optimistic mode (the ledger's default): one transaction per message,
	// applied (24) or absorbed as a duplicate (8); no claim, no complete but
	// for the poison message, which failed and was tried under a claim.
	require.Contains(t, metrics, `exactly_aws_requests_total{operation="TransactWriteItems",service="DynamoDB"} 32`)
	require.Contains(t, metrics, `exactly_aws_requests_total{operation="ReceiveMessage",service="SQS"}`)
	require.Contains(t, httpGet(t, "http://"+addr+"/readyz"), "ready")

	// SIGTERM: graceful stop, exit 0, promptly (open long polls of at most
	// --wait-time are left to return, so that SQS strands no message).
	stopWorker(t, w)
	_, stopped := w.field("worker stopped", "applied")
	require.True(t, stopped)
}

func queueEmpty(t *testing.T, c *sqs.Client, url string) bool {
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Logf("queue attributes: %v", err)
		return false
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

func scanAll(t *testing.T, db *dynamodb.Client, table string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	var items []map[string]ddbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		items = append(items, page.Items...)
	}
	return items
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// newQueueAndTable sets up a FIFO queue and a dedup table with the worker's
// own setup command, removed when the test ends; it returns the queue's
// name and URL and the table's name.
func newQueueAndTable(t *testing.T, prefix string) (queue, url, table string) {
	t.Helper()
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	suffix := testenv.Name(prefix)
	queue, table = suffix+".fifo", suffix+"-dedup"
	out := runCLI(t, "setup", "--queue", queue, "--table", table)
	url = strings.Fields(strings.Split(out, "\n")[0])[1]
	t.Cleanup(func() {
		_, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return queue, url, table
}

// stopWorker sends SIGTERM and requires a clean exit within 15 s.
func stopWorker(t *testing.T, w *proc) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-w.done:
		require.NoError(t, err, "worker exits 0 on SIGTERM")
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not exit within 15s of SIGTERM")
	}
}
