package exactly

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewDynamoDBClient is dynamodb.NewFromConfig for Config.DynamoDB (and
// idempotency.Config.DynamoDB), made quiet against a local endpoint: when the
// client has a custom endpoint (cfg.BaseEndpoint, AWS_ENDPOINT_URL_DYNAMODB
// or AWS_ENDPOINT_URL), it turns off the SDK's check of the CRC32 that
// DynamoDB sends with each response. DynamoDB Local sends a CRC32 of 0 with
// every error, and the SDK then logs "failed to close HTTP response body
// ... response did not match expected checksum" for each failed
// conditional write, which the worker makes for every duplicate. Against
// DynamoDB itself it is dynamodb.NewFromConfig; optFns run before the
// check is decided, so an option of yours may set BaseEndpoint, or set
// DisableValidateResponseChecksum itself (dynamodb.Options) on a client
// you build yourself.
func NewDynamoDBClient(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	fns := append(append([]func(*dynamodb.Options){}, optFns...), func(o *dynamodb.Options) {
		if o.BaseEndpoint != nil {
			o.DisableValidateResponseChecksum = true
		}
	})
	return dynamodb.NewFromConfig(cfg, fns...)
}
