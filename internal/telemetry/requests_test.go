package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/telemetry"
)

// TestRequestsCountsEveryAttempt: the counter sits inside the retry loop, so a
// request retried after a 500 counts twice, as AWS bills it.
func TestRequestsCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrls":[]}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	q := telemetry.NewRequests(reg)
	client := sqs.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL),
		APIOptions:   []func(*middleware.Stack) error{q.APIOption},
	})
	_, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{})
	require.NoError(t, err)
	require.EqualValues(t, 2, hits.Load())
	require.EqualValues(t, 2, q.Count("SQS", "ListQueues"))
	require.EqualValues(t, 2, q.Count("SQS", ""))
	require.EqualValues(t, 0, q.Count("DynamoDB", ""))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 2)
	require.Equal(t, "exactly_aws_requests_total", mfs[0].GetName())
	require.Equal(t, 2.0, mfs[0].GetMetric()[0].GetCounter().GetValue())
	require.Equal(t, "exactly_dynamodb_write_units_total", mfs[1].GetName())
	require.Zero(t, mfs[1].GetMetric()[0].GetCounter().GetValue(), "no DynamoDB write")
}

// TestWriteUnitsAsAWSBills: the modelled write units follow AWS's on-demand
// billing: 1 per standard write, 2 per transaction item, also for a write
// that fails its condition; nothing for a throttled one.
func TestWriteUnitsAsAWSBills(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "DynamoDB_20120810.UpdateItem":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`))
		case "DynamoDB_20120810.DeleteItem":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"no"}`))
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	q := telemetry.NewRequests(prometheus.NewRegistry())
	db := dynamodb.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL), APIOptions: []func(*middleware.Stack) error{q.APIOption},
	}, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key})
	require.NoError(t, err)
	require.EqualValues(t, 1, q.WriteUnitsTotal())
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key})
	require.Error(t, err)
	require.EqualValues(t, 2, q.WriteUnitsTotal(), "a failed condition is billed")
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key})
	require.Error(t, err)
	require.EqualValues(t, 2, q.WriteUnitsTotal(), "a refused request is not")
	items := []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String("t"), Item: key}}, {Delete: &types.Delete{TableName: aws.String("t"), Key: key}}, {ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: key, ConditionExpression: aws.String("attribute_exists(pk)")}}}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	require.NoError(t, err)
	require.EqualValues(t, 2+6, q.WriteUnitsTotal(), "2 per transaction item")
	_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	require.NoError(t, err)
	require.EqualValues(t, 8, q.WriteUnitsTotal(), "reads are not write units")
}
