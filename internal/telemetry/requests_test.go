package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
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
	require.Len(t, mfs, 1)
	require.Equal(t, "exactly_aws_requests_total", mfs[0].GetName())
	require.Equal(t, 2.0, mfs[0].GetMetric()[0].GetCounter().GetValue())
}
