package main

import (
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// upstream answers every request with body and a CRC32 header, as DynamoDB Local does.
func upstream(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func call(t *testing.T, up, target string, mend func(string, map[string]any) bool) (map[string]any, http.Header) {
	t.Helper()
	errs := make(chan error, 1)
	srv, addr, err := serve(up, mend, errs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("X-Amz-Target", target)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatUint(uint64(crc32.ChecksumIEEE(raw)), 10), resp.Header.Get("X-Amz-Crc32"), "the CRC32 header must match the body sent")
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out, resp.Header
}

func TestDescribeTableGetsWarmThroughput(t *testing.T) {
	up := upstream(t, `{"Table":{"TableName":"t","ItemCount":3,"GlobalSecondaryIndexes":[{"IndexName":"pending"}]}}`)
	out, _ := call(t, up, "DynamoDB_20120810.DescribeTable", mendDynamoDB)
	table := out["Table"].(map[string]any)
	require.Equal(t, "ACTIVE", table["WarmThroughput"].(map[string]any)["Status"])
	require.Equal(t, "ACTIVE", table["GlobalSecondaryIndexes"].([]any)[0].(map[string]any)["WarmThroughput"].(map[string]any)["Status"])
	require.EqualValues(t, 3, table["ItemCount"], "the rest of the answer is kept")
}

func TestOtherDynamoDBAnswersPassUnchanged(t *testing.T) {
	up := upstream(t, `{"Item":{"pk":{"S":"k"}}}`)
	out, _ := call(t, up, "DynamoDB_20120810.GetItem", mendDynamoDB)
	require.Equal(t, map[string]any{"Item": map[string]any{"pk": map[string]any{"S": "k"}}}, out)
}

func TestClearedQueueAttributesAreDropped(t *testing.T) {
	up := upstream(t, `{"Attributes":{"Policy":"","RedriveAllowPolicy":"","VisibilityTimeout":"30"}}`)
	out, _ := call(t, up, "AmazonSQS.GetQueueAttributes", mendSQS)
	require.Equal(t, map[string]any{"VisibilityTimeout": "30"}, out["Attributes"])
}
