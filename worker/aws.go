package worker

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/config"
)

// clients are the AWS clients of one process. Endpoints, region and
// credentials come only from the SDK's standard sources (AWS_ENDPOINT_URL*,
// AWS_REGION, the credential chain); retries are the SDK's standard retryer.
type clients struct {
	cfg    aws.Config
	sqs    *sqs.Client
	dynamo *dynamodb.Client
}

func newClients(ctx context.Context, lookup func(string) (string, bool), opts ...func(*awsconfig.LoadOptions) error) (*clients, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, config.Errorf("no AWS region: set AWS_REGION (for example AWS_REGION=us-east-1)")
	}
	_, customDynamo := lookup("AWS_ENDPOINT_URL_DYNAMODB")
	if _, all := lookup("AWS_ENDPOINT_URL"); all {
		customDynamo = true
	}
	return &clients{
		cfg: cfg,
		sqs: sqs.NewFromConfig(cfg),
		dynamo: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			// DynamoDB sends a CRC32 of every response, which the SDK checks.
			// A custom endpoint may not (DynamoDB Local omits it on errors,
			// and the SDK then warns on every failed conditional write).
			o.DisableValidateResponseChecksum = customDynamo
		}),
	}, nil
}
