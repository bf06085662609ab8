// Package testenv gives tests clients for the local AWS stack (fauxqs and
// DynamoDB Local, started by scripts/stack) and throwaway queues and tables.
//
// Integration tests call SQS(t) or DynamoDB(t). Without an endpoint in the
// environment they skip, unless EXACTLY_REQUIRE_INTEGRATION=1 (set by
// `make test`), in which case they fail: in `make test` nothing is skipped.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/exactlyonce/exactly/internal/idleconns"
)

// Require reports whether integration tests must run (EXACTLY_REQUIRE_INTEGRATION=1).
func Require() bool { return os.Getenv("EXACTLY_REQUIRE_INTEGRATION") == "1" }

func need(t testing.TB, envs ...string) {
	t.Helper()
	for _, e := range envs {
		if os.Getenv(e) != "" {
			return
		}
	}
	if Require() {
		t.Fatalf("integration test needs %s (run it through `make test`, which starts the local stack)", envs[0])
	}
	t.Skipf("integration test: %s not set (run `make test`)", envs[0])
}

// Config loads the SDK configuration the way the worker does, with test
// credentials and a region when none are set.
func Config(t testing.TB, opts ...func(*awsconfig.LoadOptions) error) aws.Config {
	t.Helper()
	base := []func(*awsconfig.LoadOptions) error{}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		base = append(base, awsconfig.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		base = append(base, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	// The connections this config's clients open are closed when the test
	// ends, so that none is left in the SDK's pool with its two goroutines:
	// the packages' TestMain checks for goroutines left running (goleak).
	conns := &idleconns.Set{}
	t.Cleanup(conns.Close)
	base = append(base, awsconfig.WithHTTPClient(conns.Client()))
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), append(base, opts...)...)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	return cfg
}

// DynamoDB returns a client for the local DynamoDB.
func DynamoDB(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	need(t, "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")
	fns := append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }}, optFns...)
	return dynamodb.NewFromConfig(Config(t), fns...)
}

// SQS returns a client for the local SQS.
func SQS(t testing.TB, optFns ...func(*sqs.Options)) *sqs.Client {
	t.Helper()
	need(t, "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL")
	return sqs.NewFromConfig(Config(t), optFns...)
}

// SNS returns a client for the local SNS (fauxqs serves it on the SQS
// port; scripts/stack sets AWS_ENDPOINT_URL_SNS to it).
func SNS(t testing.TB, optFns ...func(*sns.Options)) *sns.Client {
	t.Helper()
	need(t, "AWS_ENDPOINT_URL_SNS", "AWS_ENDPOINT_URL")
	return sns.NewFromConfig(Config(t), optFns...)
}

// Name returns a unique resource name with prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// NewTable creates a table keyed by pk (S), with TTL on expires_at when ttl
// is set, and deletes it when the test ends.
func NewTable(t testing.TB, db *dynamodb.Client, ttl bool) string {
	t.Helper()
	ctx := context.Background()
	name := Name("t")
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	if ttl {
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               &name,
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
		})
		if err != nil {
			t.Fatalf("enable TTL: %v", err)
		}
	}
	return name
}

// QueueAdmin is what NewQueue needs: *sqs.Client, or the in-memory SQS.
type QueueAdmin interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
}

// NewQueue creates a queue (FIFO when fifo) with the given attributes, plus
// a dead-letter queue with maxReceiveCount when maxReceive > 0, and deletes
// them when the test ends. It returns the queue URL and the DLQ URL.
func NewQueue(t testing.TB, client QueueAdmin, fifo bool, attrs map[string]string, maxReceive int) (url, dlqURL string) {
	t.Helper()
	ctx := context.Background()
	name := Name("q")
	suffix := ""
	all := map[string]string{"VisibilityTimeout": "30"}
	if fifo {
		suffix = ".fifo"
		all["FifoQueue"] = "true"
	}
	for k, v := range attrs {
		all[k] = v
	}
	if maxReceive > 0 {
		dattrs := map[string]string{}
		if fifo {
			dattrs["FifoQueue"] = "true"
		}
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq" + suffix), Attributes: dattrs})
		if err != nil {
			t.Fatalf("create DLQ: %v", err)
		}
		dlqURL = aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &dlqURL}) })
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlqURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("DLQ arn: %v", err)
		}
		all["RedrivePolicy"] = `{"deadLetterTargetArn":"` + a.Attributes["QueueArn"] + `","maxReceiveCount":"` + strconv.Itoa(maxReceive) + `"}`
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix), Attributes: all})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	url = aws.ToString(out.QueueUrl)
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url}) })
	return url, dlqURL
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RequireDocShows fails unless doc (a path from the repository's root, such
// as "docs/LIBRARY.md") holds the example's main.go verbatim, from `package
// main` on, as a Go code block: the doc's example is then code the build
// compiles. It runs in the example's directory, two levels below the root.
func RequireDocShows(t testing.TB, doc, example string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	code = code[strings.Index(code, "package main"):]
	if !strings.Contains(string(text), "```go\n"+code+"```") {
		t.Fatalf("%s must show %s/main.go from `package main` on, verbatim, in a ```go block", doc, example)
	}
}

// SyncBuffer is a bytes.Buffer safe for a writer and a reader at once (a
// process's or a command's output read while it runs).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
