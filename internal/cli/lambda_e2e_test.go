package cli_test

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// runtimeAPI is a Lambda Runtime API (version 2018-06-01) for one function
// instance, as the Lambda service serves it inside the sandbox: the runtime
// polls /next, which blocks until an invocation arrives and hands it over with
// its request id and deadline; the runtime answers with /response or /error;
// an init that fails posts /init/error. One invocation at a time; a response
// for any request id but the current one is refused, as Lambda refuses it.
type runtimeAPI struct {
	t        *testing.T
	srv      *httptest.Server
	pending  chan apiInvocation
	closed   chan struct{}
	initErrs chan apiError

	mu      sync.Mutex
	current string
	results map[string]chan apiResult
	bad     []string // protocol violations by the runtime
}

type apiInvocation struct {
	id       string
	payload  []byte
	deadline time.Time
}

type apiResult struct {
	kind string // response or error
	body []byte
}

type apiError struct {
	errType string // Lambda-Runtime-Function-Error-Type
	body    map[string]any
}

const (
	testFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:exactly-lambda-e2e"
	runtimePrefix   = "/2018-06-01/runtime/"
)

func newRuntimeAPI(t *testing.T) *runtimeAPI {
	api := &runtimeAPI{
		t: t, pending: make(chan apiInvocation, 16), closed: make(chan struct{}), initErrs: make(chan apiError, 4),
		results: map[string]chan apiResult{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+runtimePrefix+"invocation/next", api.next)
	mux.HandleFunc("POST "+runtimePrefix+"invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) { api.finish(w, r, "response") })
	mux.HandleFunc("POST "+runtimePrefix+"invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) { api.finish(w, r, "error") })
	mux.HandleFunc("POST "+runtimePrefix+"init/error", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			api.violation("init/error body is not JSON: %q", b)
		}
		api.initErrs <- apiError{errType: r.Header.Get("Lambda-Runtime-Function-Error-Type"), body: body}
		accepted(w)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.violation("unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	api.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(api.closed)
		api.srv.Close()
		api.mu.Lock()
		defer api.mu.Unlock()
		for _, v := range api.bad {
			t.Errorf("runtime API protocol: %s", v)
		}
	})
	return api
}

// addr is what AWS_LAMBDA_RUNTIME_API holds: host:port, no scheme.
func (api *runtimeAPI) addr() string { return strings.TrimPrefix(api.srv.URL, "http://") }

func (api *runtimeAPI) violation(format string, args ...any) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.bad = append(api.bad, fmt.Sprintf(format, args...))
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"status":"OK"}`))
}

func (api *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	if api.current != "" {
		api.violation("GET next while invocation %s has no response", api.current)
	}
	api.mu.Unlock()
	var inv apiInvocation
	select {
	case inv = <-api.pending:
	case <-r.Context().Done():
		return
	case <-api.closed:
		return
	}
	api.mu.Lock()
	api.current = inv.id
	api.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", testFunctionARN)
	h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+strconv.FormatInt(time.Now().Unix(), 16)+"-"+inv.id[:24]+";Parent="+inv.id[:16]+";Sampled=0")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.payload)
}

func (api *runtimeAPI) finish(w http.ResponseWriter, r *http.Request, kind string) {
	id := r.PathValue("id")
	body, _ := io.ReadAll(r.Body)
	api.mu.Lock()
	ch, ok := api.results[id]
	if !ok || id != api.current {
		api.mu.Unlock()
		api.violation("%s for request %s, which is not the current invocation (%s)", kind, id, api.current)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}`))
		return
	}
	api.current = ""
	delete(api.results, id)
	api.mu.Unlock()
	ch <- apiResult{kind: kind, body: body}
	accepted(w)
}

// invoke hands ev to the function with the given timeout, as Lambda does,
// and returns its response. An /error answer, or none before the deadline
// (Lambda would time the invocation out), fails the test.
func (api *runtimeAPI) invoke(t *testing.T, ev events.SQSEvent, timeout time.Duration) events.SQSEventResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	ch := make(chan apiResult, 1)
	api.mu.Lock()
	api.results[id] = ch
	api.mu.Unlock()
	deadline := time.Now().Add(timeout)
	api.pending <- apiInvocation{id: id, payload: payload, deadline: deadline}
	select {
	case res := <-ch:
		require.Equal(t, "response", res.kind, "function error: %s", res.body)
		require.True(t, time.Now().Before(deadline), "response after the deadline")
		var resp events.SQSEventResponse
		require.NoError(t, json.Unmarshal(res.body, &resp), "response %s", res.body)
		return resp
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatalf("invocation %s: no response within its %s timeout", id, timeout)
	}
	return events.SQSEventResponse{}
}

const lambdaTestVersion = "lambda-e2e"

// lambdaArch is the architecture of the package under test: this machine's,
// or EXACTLY_LAMBDA_ARCH (amd64 or arm64) run through qemu-user, for a
// by-hand check of the other package:
//
//	EXACTLY_LAMBDA_ARCH=arm64 make test   # needs qemu-aarch64-static (Debian qemu-user-static)
func lambdaArch(t *testing.T) (arch string, emulator []string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the Lambda packages are Linux executables; this is %s", runtime.GOOS)
	}
	arch = os.Getenv("EXACTLY_LAMBDA_ARCH")
	if arch == "" || arch == runtime.GOARCH {
		if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
			t.Skipf("no Lambda package for %s; set EXACTLY_LAMBDA_ARCH=amd64 or arm64 (with qemu-user)", runtime.GOARCH)
		}
		return runtime.GOARCH, nil
	}
	cpu := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
	require.NotEmpty(t, cpu, "EXACTLY_LAMBDA_ARCH=%q: want amd64 or arm64", arch)
	qemu, err := exec.LookPath("qemu-" + cpu + "-static")
	require.NoError(t, err, "EXACTLY_LAMBDA_ARCH=%s needs qemu-%s-static (Debian package qemu-user-static)", arch, cpu)
	return arch, []string{qemu}
}

// bootstrapCommand runs the bootstrap (under qemu-user for another architecture).
func bootstrapCommand(t *testing.T, bootstrap string, args ...string) *exec.Cmd {
	_, emulator := lambdaArch(t)
	if len(emulator) > 0 {
		return exec.Command(emulator[0], append(append(emulator[1:], bootstrap), args...)...)
	}
	return exec.Command(bootstrap, args...)
}

// lambdaBootstrap builds the Lambda zip with `make dist`'s own recipe
// (mk/build.mk), unpacks it as Lambda does into a task root and returns the
// path of its bootstrap. Go's build cache makes the second build a link.
func lambdaBootstrap(t *testing.T) string {
	t.Helper()
	arch, _ := lambdaArch(t)
	dir := t.TempDir()
	zipPath := filepath.Join(dir, "worker-lambda-"+arch+".zip")
	cmd := exec.Command("make", "-s", "-f", "mk/build.mk", "DIST="+dir, "VERSION="+lambdaTestVersion, zipPath)
	cmd.Dir = "../.." // the repository root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make %s:\n%s", zipPath, out)
	bootstrap, err := unzipBootstrap(zipPath, filepath.Join(dir, "task"))
	require.NoError(t, err)
	return bootstrap
}

// unzipBootstrap checks the package's layout and unpacks it.
func unzipBootstrap(zipPath, taskRoot string) (string, error) {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return "", err
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
		return "", fmt.Errorf("%s: want exactly one entry, bootstrap", zipPath)
	}
	f := zr.File[0]
	if f.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: bootstrap is not executable (mode %s)", zipPath, f.Mode())
	}
	rc, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if err := os.MkdirAll(taskRoot, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(taskRoot, "bootstrap")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, f.Mode().Perm())
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		return "", err
	}
	return path, out.Close()
}

// requireStatic fails unless the ELF file at path needs no dynamic loader or
// shared library (provided.al2023 and scratch images have no Go-compatible libc).
func requireStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "%s asks for a dynamic loader", path)
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "%s links shared libraries", path)
	arch, _ := lambdaArch(t)
	require.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch], f.Machine)
}

// startBootstrap runs the bootstrap as Lambda does: no arguments, the task
// root as working directory, AWS_LAMBDA_RUNTIME_API and the function's
// environment (settings). WORKER_* variables of the test's own environment
// are left out.
func startBootstrap(t *testing.T, bootstrap string, api *runtimeAPI, settings ...string) *proc {
	t.Helper()
	cmd := bootstrapCommand(t, bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WORKER_") && !strings.HasPrefix(kv, "AWS_LAMBDA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"AWS_LAMBDA_RUNTIME_API="+api.addr(), "AWS_LAMBDA_FUNCTION_NAME=exactly-lambda-e2e",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"LAMBDA_TASK_ROOT="+cmd.Dir, "_HANDLER=bootstrap", "AWS_REGION=us-east-1",
		"WORKER_LOG_FORMAT=json")
	cmd.Env = append(cmd.Env, settings...)
	return startProc(t, cmd, "bootstrap")
}

// lambdaQueue is a queue made for the test, with what an event needs of it.
type lambdaQueue struct {
	url, arn, dlq string
}

func newLambdaQueue(t *testing.T, c *sqs.Client, fifo bool, attrs map[string]string, maxReceive int) lambdaQueue {
	t.Helper()
	url, dlq := testenv.NewQueue(t, c, fifo, attrs, maxReceive)
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	require.NoError(t, err)
	return lambdaQueue{url: url, arn: out.Attributes["QueueArn"], dlq: dlq}
}

type sendSpec struct {
	group, dedupID, key, body string
}

func sendAll(t *testing.T, c *sqs.Client, q lambdaQueue, msgs ...sendSpec) {
	t.Helper()
	for _, m := range msgs {
		in := &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: aws.String(m.body)}
		if m.group != "" {
			in.MessageGroupId = aws.String(m.group)
			in.MessageDeduplicationId = aws.String(m.dedupID)
		}
		if m.key != "" {
			in.MessageAttributes = map[string]sqstypes.MessageAttributeValue{
				"idempotency-key": {DataType: aws.String("String"), StringValue: aws.String(m.key)},
			}
		}
		_, err := c.SendMessage(context.Background(), in)
		require.NoError(t, err)
	}
}

// receiveEvent receives n messages from q, as the event source mapping does
// (several receives when needed), as one event.
func receiveEvent(t *testing.T, c *sqs.Client, q lambdaQueue, n int) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	deadline := time.Now().Add(15 * time.Second)
	for len(ev.Records) < n {
		require.True(t, time.Now().Before(deadline), "received %d of %d messages", len(ev.Records), n)
		ev.Records = append(ev.Records, receiveUpTo(t, c, q, n-len(ev.Records)).Records...)
	}
	return ev
}

// receiveUpTo makes one ReceiveMessage call for at most n messages (long
// poll of 1s) and returns them as the SQS event Lambda would deliver: the
// real message ids, receipt handles, system and message attributes.
func receiveUpTo(t *testing.T, c *sqs.Client, q lambdaQueue, n int) events.SQSEvent {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &q.url, MaxNumberOfMessages: int32(min(10, n)), WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	require.NoError(t, err)
	var ev events.SQSEvent
	for _, m := range out.Messages {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: q.arn, AWSRegion: "us-east-1",
			MessageAttributes: map[string]events.SQSMessageAttribute{},
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: []string{}, BinaryListValues: [][]byte{},
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// settle does what the event source mapping does with a response: it deletes
// the messages not reported. The reported ones come back when their
// visibility timeout ends; the test lets that time pass at once.
func settle(t *testing.T, c *sqs.Client, q lambdaQueue, ev events.SQSEvent, resp events.SQSEventResponse) {
	t.Helper()
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	ctx := context.Background()
	for _, r := range ev.Records {
		var err error
		if failed[r.MessageId] {
			_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q.url, ReceiptHandle: aws.String(r.ReceiptHandle)})
		} else {
			_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
		require.NoError(t, err)
	}
}

// byBody maps each record's body to its message id.
func byBody(ev events.SQSEvent) map[string]string {
	out := map[string]string{}
	for _, r := range ev.Records {
		out[r.Body] = r.MessageId
	}
	return out
}

func failedIDs(resp events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func deposit(acct string, cents, seq int) string {
	return fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, cents, seq)
}

func balances(t *testing.T, db *dynamodb.Client, ledger string) map[string]int64 {
	t.Helper()
	bs, err := cli.ReadBalances(context.Background(), db, ledger)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, b := range bs {
		out[b.Account] = b.BalanceCents
	}
	return out
}

// TestLambdaBootstrap runs the built Lambda package's bootstrap against a
// Runtime API, with events made of real messages from SQS (fauxqs): the
// test plays the event source mapping. It covers a FIFO queue batch by batch
// as the mapping sees it, with a poison message that ends in the dead-letter
// queue while the rest of its group then succeeds; a poison message in the
// middle of a group within one batch; duplicates; a standard queue; a
// high-throughput FIFO queue whose dedup scope is read at cold start; and
// --move-to-dlq.
func TestLambdaBootstrap(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	bootstrap := lambdaBootstrap(t)
	requireStatic(t, bootstrap)
	out, err := bootstrapCommand(t, bootstrap, "version").Output()
	require.NoError(t, err)
	require.Equal(t, "worker "+lambdaTestVersion+"\n", string(out), "version from -ldflags")

	table, ledger := testenv.NewTable(t, db, true), testenv.NewTable(t, db, false)
	fifo := newLambdaQueue(t, sqsc, true, nil, 1)
	inBatch := newLambdaQueue(t, sqsc, true, nil, 0)
	std := newLambdaQueue(t, sqsc, false, nil, 0)
	perGroup := newLambdaQueue(t, sqsc, true, map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}, 0)

	api := newRuntimeAPI(t)
	fn := startBootstrap(t, bootstrap, api, "WORKER_EFFECT=ledger", "WORKER_DEDUP_TABLE="+table, "WORKER_LEDGER_TABLE="+ledger,
		"WORKER_QUEUES="+fifo.url+","+perGroup.url)
	const timeout = 20 * time.Second
	poison := `{"account":"A","seq":2}` // no amount_cents: the ledger effect fails it permanently

	t.Run("fifo batches as the mapping receives them", func(t *testing.T) {
		// Group A has the poison message between a1 and a3; c1-retry is a
		// producer retry of c1 (same idempotency-key, new dedup id).
		sendAll(t, sqsc, fifo,
			sendSpec{"A", "a1", "a1", deposit("A", 100, 1)},
			sendSpec{"B", "b1", "b1", deposit("B", 10, 1)},
			sendSpec{"A", "a2", "a2", poison},
			sendSpec{"C", "c1", "c1", deposit("C", 7, 1)},
			sendSpec{"A", "a3", "a3", deposit("A", 300, 3)},
			sendSpec{"B", "b2", "b2", deposit("B", 20, 2)},
			sendSpec{"C", "c1-retry", "c1", deposit("C", 7, 1)},
		)
		var reported []string
		var first events.SQSEvent
		for round := 0; !queueEmpty(t, sqsc, fifo.url); round++ {
			require.Less(t, round, 10, "the queue drains")
			ev := receiveUpTo(t, sqsc, fifo, 10)
			if len(ev.Records) == 0 {
				continue
			}
			if first.Records == nil {
				first = ev
			}
			resp := api.invoke(t, ev, timeout)
			for _, id := range failedIDs(resp) {
				require.Equal(t, poison, bodyOf(ev, id), "only the poison message fails")
				reported = append(reported, id)
			}
			settle(t, sqsc, fifo, ev, resp)
		}
		require.Len(t, reported, 1, "reported once; at the next receive the redrive policy moved it")
		require.Equal(t, map[string]int64{"A": 400, "B": 30, "C": 7}, balances(t, db, ledger))
		dl, err := sqsc.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &fifo.dlq, WaitTimeSeconds: 2, MaxNumberOfMessages: 10})
		require.NoError(t, err)
		require.Len(t, dl.Messages, 1)
		require.Equal(t, poison, aws.ToString(dl.Messages[0].Body))
		require.Equal(t, reported[0], aws.ToString(dl.Messages[0].MessageId))

		// Lambda may invoke a batch again: its records are duplicates now,
		// and duplicates are successes that apply nothing.
		require.Empty(t, api.invoke(t, first, timeout).BatchItemFailures)
		require.Equal(t, map[string]int64{"A": 400, "B": 30, "C": 7}, balances(t, db, ledger))
		var dups, applied float64
		for _, l := range fn.lines("batch done") {
			dups += l["duplicates"].(float64)
			applied += l["applied"].(float64)
		}
		require.EqualValues(t, 1+len(first.Records), dups, "the producer retry, then the whole batch again")
		require.EqualValues(t, 5, applied)
		perm := fn.lines("permanent failure: left to the queue's redrive policy")
		require.Len(t, perm, 1)
		require.Equal(t, "ERROR", perm[0]["level"])
		require.Equal(t, reported[0], perm[0]["message_id"])
	})

	t.Run("poison in the middle of a group in one batch", func(t *testing.T) {
		sendAll(t, sqsc, inBatch,
			sendSpec{"A", "a1", "a1", deposit("D", 100, 1)},
			sendSpec{"B", "b1", "b1", deposit("E", 10, 1)},
			sendSpec{"A", "a2", "a2", poison},
			sendSpec{"C", "c1", "c1", deposit("F", 7, 1)},
			sendSpec{"A", "a3", "a3", deposit("D", 300, 3)},
			sendSpec{"B", "b2", "b2", deposit("E", 20, 2)},
			sendSpec{"A", "a4", "a4", deposit("D", 400, 4)},
			sendSpec{"B", "b3", "b3", deposit("E", 30, 3)},
		)
		ev := collectGroups(t, sqsc, inBatch, 8)
		resp := api.invoke(t, ev, timeout)
		// The poison message and every later message of its group, in batch
		// order; the other groups succeed.
		var want []string
		for _, r := range ev.Records {
			if r.Attributes["MessageGroupId"] == "A" && r.Body != deposit("D", 100, 1) {
				want = append(want, r.MessageId)
			}
		}
		require.Len(t, want, 3)
		require.Equal(t, poison, bodyOf(ev, want[0]))
		require.Equal(t, want, failedIDs(resp))
		require.Equal(t, int64(100), balances(t, db, ledger)["D"])
		require.Equal(t, int64(60), balances(t, db, ledger)["E"])
		require.Equal(t, int64(7), balances(t, db, ledger)["F"])
		last := fn.lines("batch done")
		require.EqualValues(t, 2, last[len(last)-1]["not_started"])

		// The reported messages come back after the visibility timeout; the
		// poison one reaches the dead-letter queue at maxReceiveCount, the
		// rest of its group then succeeds.
		var redelivered events.SQSEvent
		for _, r := range ev.Records {
			if r.MessageId == want[1] || r.MessageId == want[2] {
				r.Attributes = maps.Clone(r.Attributes)
				r.Attributes["ApproximateReceiveCount"] = "2"
				redelivered.Records = append(redelivered.Records, r)
			}
		}
		require.Empty(t, api.invoke(t, redelivered, timeout).BatchItemFailures)
		require.Equal(t, int64(800), balances(t, db, ledger)["D"])
	})

	t.Run("standard queue", func(t *testing.T) {
		sendAll(t, sqsc, std,
			sendSpec{body: deposit("S1", 1, 0)}, sendSpec{body: `not json`}, sendSpec{body: deposit("S2", 2, 0)},
			sendSpec{body: deposit("S3", 3, 0)})
		ev := receiveEvent(t, sqsc, std, 4)
		resp := api.invoke(t, ev, timeout)
		require.Equal(t, []string{byBody(ev)["not json"]}, failedIDs(resp), "each message stands alone")
		settle(t, sqsc, std, ev, resp)
		require.Equal(t, int64(1), balances(t, db, ledger)["S1"])
		require.Equal(t, int64(3), balances(t, db, ledger)["S3"])
	})

	t.Run("dedup scope read at cold start", func(t *testing.T) {
		// DeduplicationScope=messageGroup: the same key in two groups is two
		// messages. Scoped per queue they would conflict.
		sendAll(t, sqsc, perGroup,
			sendSpec{"X", "x1", "same-key", deposit("X", 5, 1)},
			sendSpec{"Y", "y1", "same-key", deposit("Y", 6, 1)})
		ev := receiveEvent(t, sqsc, perGroup, 2)
		resp := api.invoke(t, ev, timeout)
		require.Empty(t, resp.BatchItemFailures)
		settle(t, sqsc, perGroup, ev, resp)
		require.Equal(t, int64(5), balances(t, db, ledger)["X"])
		require.Equal(t, int64(6), balances(t, db, ledger)["Y"])
	})

	t.Run("move to the dead-letter queue", func(t *testing.T) {
		// Another function, with --move-to-dlq: a permanent failure goes to
		// the dead-letter queue at once, as it came, and is not reported.
		moving := newLambdaQueue(t, sqsc, true, nil, 5)
		api2 := newRuntimeAPI(t)
		startBootstrap(t, bootstrap, api2, "WORKER_EFFECT=ledger", "WORKER_DEDUP_TABLE="+table, "WORKER_LEDGER_TABLE="+ledger,
			"WORKER_QUEUES="+moving.url, "WORKER_MOVE_TO_DLQ=true")
		sendAll(t, sqsc, moving,
			sendSpec{"M", "m1", "m1", `{"account":"M"}`},
			sendSpec{"M", "m2", "m2", deposit("M", 9, 2)},
			sendSpec{"N", "n1", "n1", deposit("N", 4, 1)})
		ev := receiveEvent(t, sqsc, moving, 2) // fauxqs: m1 and n1
		resp := api2.invoke(t, ev, timeout)
		require.Empty(t, resp.BatchItemFailures)
		settle(t, sqsc, moving, ev, resp)
		dl, err := sqsc.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &moving.dlq, WaitTimeSeconds: 2, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		require.NoError(t, err)
		require.Len(t, dl.Messages, 1)
		require.JSONEq(t, `{"account":"M"}`, aws.ToString(dl.Messages[0].Body))
		require.Equal(t, "M", dl.Messages[0].Attributes["MessageGroupId"])
		var poisonID string
		for _, r := range ev.Records {
			if r.Body == `{"account":"M"}` {
				poisonID = r.MessageId
			}
		}
		require.Equal(t, sqsmsg.CopyDeduplicationID(poisonID), dl.Messages[0].Attributes["MessageDeduplicationId"],
			"a dedup id of its own, not the source's m1")
		require.Equal(t, "m1", aws.ToString(dl.Messages[0].MessageAttributes["idempotency-key"].StringValue))
		ev = receiveEvent(t, sqsc, moving, 1)
		require.Equal(t, deposit("M", 9, 2), ev.Records[0].Body, "the group goes on without it")
		resp = api2.invoke(t, ev, timeout)
		require.Empty(t, resp.BatchItemFailures)
		settle(t, sqsc, moving, ev, resp)
		require.Equal(t, int64(9), balances(t, db, ledger)["M"])
		require.Equal(t, int64(4), balances(t, db, ledger)["N"])
	})

	// The dedup records: one per logical message, scoped as each queue is.
	pks := map[string]bool{}
	for _, it := range scanAll(t, db, table) {
		pks[it["pk"].(*ddbtypes.AttributeValueMemberS).Value] = true
	}
	for _, k := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		require.True(t, pks["exactly#"+filepath.Base(fifo.url)+"#"+k], k)
	}
	require.True(t, pks["exactly#"+filepath.Base(perGroup.url)+"#X#same-key"])
	require.True(t, pks["exactly#"+filepath.Base(perGroup.url)+"#Y#same-key"])

	// One process served every invocation of the first function, after one init.
	require.Len(t, fn.lines("lambda worker ready"), 1)
	require.Nil(t, fn.exited(), "the function is still running")
}

// collectGroups gathers n messages of a FIFO queue into one event, sorted
// by sequence number as SQS hands out each group. SQS can return several
// messages of one group in one receive, and an event source mapping batch
// can hold them; fauxqs returns at most one message per group per receive
// and holds the group until it is deleted. So each message is deleted as it
// is collected: the records are fauxqs's own, but the queue no longer has
// them, and what the mapping would do afterwards is up to the test.
func collectGroups(t *testing.T, c *sqs.Client, q lambdaQueue, n int) events.SQSEvent {
	t.Helper()
	var all events.SQSEvent
	deadline := time.Now().Add(20 * time.Second)
	for len(all.Records) < n {
		require.True(t, time.Now().Before(deadline), "collected %d of %d messages", len(all.Records), n)
		ev := receiveUpTo(t, c, q, 10)
		for _, r := range ev.Records {
			_, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: aws.String(r.ReceiptHandle)})
			require.NoError(t, err)
		}
		all.Records = append(all.Records, ev.Records...)
	}
	sort.SliceStable(all.Records, func(i, j int) bool {
		a, b := all.Records[i].Attributes["SequenceNumber"], all.Records[j].Attributes["SequenceNumber"]
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return a < b
	})
	return all
}

func bodyOf(ev events.SQSEvent, id string) string {
	for _, r := range ev.Records {
		if r.MessageId == id {
			return r.Body
		}
	}
	return ""
}

// TestLambdaBootstrapInitError: a configuration error fails the init once,
// with one line on stderr and the same message posted to the Runtime API's
// init/error, and a non-zero exit; no invocation is fetched.
func TestLambdaBootstrapInitError(t *testing.T) {
	testenv.DynamoDB(t) // the missing-table case asks DynamoDB Local
	bootstrap := lambdaBootstrap(t)
	cases := []struct {
		name     string
		settings []string
		errType  string
		want     string
	}{
		{"missing table", []string{"WORKER_EFFECT=noop", "WORKER_DEDUP_TABLE=" + testenv.Name("missing")}, "Runtime.ConfigInvalid", "does not exist"},
		{"bad fail-rest", []string{"WORKER_EFFECT=noop", "WORKER_FIFO_FAIL_REST=all"}, "Runtime.ConfigInvalid", "--fifo-fail-rest (WORKER_FIFO_FAIL_REST)"},
		{"no effect", nil, "Runtime.ConfigInvalid", "--effect (WORKER_EFFECT) is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api := newRuntimeAPI(t)
			fn := startBootstrap(t, bootstrap, api, c.settings...)
			var got apiError
			select {
			case got = <-api.initErrs:
			case <-time.After(20 * time.Second):
				t.Fatal("no init/error posted")
			}
			require.Equal(t, c.errType, got.errType)
			require.Equal(t, "ConfigError", got.body["errorType"])
			require.Contains(t, got.body["errorMessage"], c.want)
			select {
			case err := <-fn.done:
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, cli.ExitConfig, ee.ExitCode())
			case <-time.After(10 * time.Second):
				t.Fatal("the bootstrap did not exit after its init error")
			}
			lines := fn.snapshot()
			require.Len(t, lines, 1, "one line: %v", lines)
			require.Contains(t, lines[0]["msg"], c.want)
		})
	}
}
