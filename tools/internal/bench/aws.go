package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/idleconns"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// clients are one set of SDK clients whose requests are counted; close
// closes their idle connections when the harness is done with them.
type clients struct {
	sqs   *sqs.Client
	db    *dynamodb.Client
	reqs  *telemetry.Requests
	conns *idleconns.Set
}

func (c *clients) close() { c.conns.Close() }

// newClients loads the SDK configuration as the worker does (endpoints from
// AWS_ENDPOINT_URL*, the standard retryer), with a region and test
// credentials when none are set. idle > 0 keeps that many idle connections
// per host instead of the SDK's 10, so that a raw measurement at high
// concurrency measures the emulator and not connection churn.
func newClients(ctx context.Context, idle int) (*clients, error) {
	if os.Getenv("AWS_ENDPOINT_URL_SQS") == "" && os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		return nil, errors.New("no emulator endpoints: run through scripts/with-stack (or eval \"$(scripts/stack env)\")")
	}
	var opts []func(*awsconfig.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, awsconfig.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	conns := &idleconns.Set{}
	var tune []func(*http.Transport)
	if idle > 0 {
		tune = append(tune, func(t *http.Transport) {
			t.MaxIdleConns = 4 * idle
			t.MaxIdleConnsPerHost = idle
		})
	}
	opts = append(opts, awsconfig.WithHTTPClient(conns.Client(tune...)))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot load AWS configuration: %w", err)
	}
	reqs := telemetry.NewRequests(nil)
	cfg.APIOptions = append(cfg.APIOptions, reqs.APIOption)
	return &clients{
		sqs:   sqs.NewFromConfig(cfg),
		db:    dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }),
		reqs:  reqs,
		conns: conns,
	}, nil
}

func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// newQueue creates a FIFO queue with a 30 s visibility timeout.
func (c *clients) newQueue(ctx context.Context, prefix string) (string, error) {
	out, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(uniqueName(prefix) + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"},
	})
	if err != nil {
		return "", fmt.Errorf("cannot create queue: %w", err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func (c *clients) deleteQueue(url string) {
	_, _ = c.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url})
}

// newTable creates a table keyed by pk (S), with TTL on expires_at if ttl.
func (c *clients) newTable(ctx context.Context, prefix string, ttl bool) (string, error) {
	name := uniqueName(prefix)
	_, err := c.db.CreateTable(ctx, keyedTableInput(name))
	if err != nil {
		return "", fmt.Errorf("cannot create table: %w", err)
	}
	if ttl {
		_, err = c.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               &name,
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
		})
		if err != nil {
			c.deleteTable(name)
			return "", fmt.Errorf("cannot enable TTL: %w", err)
		}
	}
	return name, nil
}

func (c *clients) deleteTable(name string) {
	_, _ = c.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
}

// fill sends w to url from senders goroutines (each owning a share of the
// groups, so that every group keeps its order) and returns the send rate.
func (c *clients) fill(ctx context.Context, url string, w Work, senders int) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for k := range senders {
		wg.Go(func() {
			for _, batch := range w.Shard(k, senders) {
				out, err := c.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: batch})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					errs <- fmt.Errorf("cannot send: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(w.N) / time.Since(start).Seconds(), nil
}

// receiveInput is what every consumer here asks for: system attributes (the
// worker reads group, sequence number and sent time from them).
func receiveInput(url string, n, wait int32) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: n, WaitTimeSeconds: wait, VisibilityTimeout: 30,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
}

func deleteEntries(ms []sqstypes.Message) []sqstypes.DeleteMessageBatchRequestEntry {
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(ms))
	for i, m := range ms {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	return entries
}
