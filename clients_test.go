package exactly_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
)

// TestNewDynamoDBClientDoesNotWarnOnALocalEndpoint: DynamoDB Local answers a
// failed conditional write with X-Amz-Crc32: 0. A client from
// dynamodb.NewFromConfig logs a checksum warning through the SDK's logger
// for it; one from exactly.NewDynamoDBClient logs nothing, and still
// returns the condition's failure.
func TestNewDynamoDBClientDoesNotWarnOnALocalEndpoint(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", "0") // as DynamoDB Local sends with errors
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`)
	}))
	t.Cleanup(srv.Close)

	put := func(db *dynamodb.Client) error {
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String("t"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		return err
	}
	for _, c := range []struct {
		name  string
		new   func(aws.Config) *dynamodb.Client
		warns bool
	}{
		{"dynamodb.NewFromConfig", func(cfg aws.Config) *dynamodb.Client { return dynamodb.NewFromConfig(cfg) }, true},
		{"exactly.NewDynamoDBClient", func(cfg aws.Config) *dynamodb.Client { return exactly.NewDynamoDBClient(cfg) }, false},
	} {
		var mu sync.Mutex
		var logs []string
		cfg := aws.Config{
			Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: aws.AnonymousCredentials{},
			Logger: logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, fmt.Sprintf(format, v...))
			}),
		}
		err := put(c.new(cfg))
		var ccf *types.ConditionalCheckFailedException
		require.ErrorAs(t, err, &ccf, c.name)
		mu.Lock()
		got := strings.Join(logs, "\n")
		mu.Unlock()
		if c.warns {
			require.Contains(t, got, "checksum", "%s: the control warns", c.name)
		} else {
			require.Empty(t, got, c.name)
		}
	}
}
