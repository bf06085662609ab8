package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ChildEnv marks a test binary started by IdleStop as the program under
// test: its TestMain runs the program's main instead of the tests.
const ChildEnv = "EXACTLY_TEST_CHILD"

// IdleStop runs this test binary again as the program under test (args
// and env added to the test's environment and ChildEnv=1), waits for a
// line of its standard error that contains ready, lets it long-poll an
// empty queue for settle, sends it SIGINT (Ctrl-C) and returns how long it
// took to exit: a measure, for the test to report. It fails the test if
// the program exits with an error, or is still running a minute after the
// signal.
func IdleStop(t testing.TB, args, env []string, ready string, settle time.Duration) time.Duration {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...) //nolint:gosec // this test binary, run again as the program under test
	cmd.Env = append(append(os.Environ(), env...), ChildEnv+"=1")
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), ready) {
		select {
		case err := <-exited:
			t.Fatalf("exited before %q: %v", ready, err)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Logf("killed: %v", <-exited)
			t.Fatalf("no %q within a minute", ready)
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(settle)
	at := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		took := time.Since(at)
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
		return took
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Logf("killed: %v", <-exited)
		t.Fatal("still running a minute after SIGINT")
		return 0
	}
}

// Median of ds (sorted in place).
func Median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// RequireNothingInFlight fails unless the queue holds no message in flight
// (ApproximateNumberOfMessagesNotVisible is 0).
func RequireNothingInFlight(t testing.TB, client *sqs.Client, url string) {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]; n != "0" {
		t.Fatalf("%s messages in flight after the stop", n)
	}
}

// EnsureTable creates the dedup table name (key pk, TTL on expires_at) if
// it does not exist, and leaves it: for a program whose table name is
// fixed (the README's example), as `worker setup --table` does.
func EnsureTable(t testing.TB, db *dynamodb.Client, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	var inUse *ddbtypes.ResourceInUseException
	if errors.As(err, &inUse) {
		return
	}
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	})
	if err != nil {
		t.Fatalf("enable TTL on %s: %v", name, err)
	}
}
