package cli

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/idleconns"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// denied turns a credential or permission error from a start-up call into a
// configuration error naming the action and resource; other errors pass.
func denied(err error, action, resource string) error {
	if msg, ok := awserr.Denied(err, action, resource); ok {
		return config.Errorf("%s", msg)
	}
	return err
}

// clients are the AWS clients of one command. Endpoints, region and
// credentials come only from the SDK's standard sources (AWS_ENDPOINT_URL*,
// AWS_REGION, the credential chain); retries are the SDK's standard retryer.
// close ends their kept-alive connections when the command is done (a
// command run in-process, as the tests do, leaves none behind).
type clients struct {
	cfg    aws.Config
	sqs    *sqs.Client
	sns    *sns.Client
	dynamo *dynamodb.Client
	conns  *idleconns.Set
}

// close closes the connections the clients opened; they are not used after.
func (c *clients) close() { c.conns.Close() }

// newClients loads the SDK configuration; reqs, when set, counts every
// request; tune, when given, adjusts the HTTP transport (keepIdle).
func newClients(ctx context.Context, _ func(string) (string, bool), reqs *telemetry.Requests, tune ...func(*http.Transport)) (*clients, error) {
	conns := &idleconns.Set{}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithHTTPClient(conns.Client(tune...)))
	if err != nil {
		return nil, fmt.Errorf("cannot load AWS configuration: %w", err)
	}
	if reqs != nil {
		cfg.APIOptions = append(cfg.APIOptions, reqs.APIOption)
	}
	if cfg.Region == "" {
		return nil, config.Errorf("no AWS region: set AWS_REGION (for example AWS_REGION=us-east-1)")
	}
	return &clients{
		cfg: cfg, conns: conns,
		sqs: sqs.NewFromConfig(cfg),
		sns: sns.NewFromConfig(cfg),
		// Without the CRC32 check against a custom endpoint, which DynamoDB
		// Local fails on every error response.
		dynamo: exactly.NewDynamoDBClient(cfg),
	}, nil
}

// keepIdle keeps up to n idle connections per host (an endpoint: SQS's,
// DynamoDB's), where the SDK's transport keeps 10: a worker whose n
// handlers and receivers call at once would otherwise close the
// connections past 10 as each call ends and dial (on AWS: a TLS
// handshake) for the next ones, again and again. Idle ones still close
// after the transport's idle timeout.
func keepIdle(n int) func(*http.Transport) {
	return func(t *http.Transport) {
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, n)
		t.MaxIdleConns = max(t.MaxIdleConns, 2*t.MaxIdleConnsPerHost)
	}
}
