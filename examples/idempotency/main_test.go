package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/idempotency"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestDocShowsThisExample keeps docs/LIBRARY.md's idempotency section in step
// with this file, which the build compiles.
func TestDocShowsThisExample(t *testing.T) {
	testenv.RequireDocShows(t, "docs/LIBRARY.md", "examples/idempotency")
}

func TestPaymentsAreChargedOnce(t *testing.T) {
	db := memdynamo.New()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("exactly-dedup"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: db, Table: "exactly-dedup"})
	require.NoError(t, err)
	api := newAPI(ledger)
	pay := func(key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set(idempotency.HeaderKey, key)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec
	}
	first := pay("k1", `{"order":"o-1","amount_cents":250}`)
	require.Equal(t, http.StatusCreated, first.Code)
	retry := pay("k1", `{"order":"o-1","amount_cents":250}`)
	require.Equal(t, "true", retry.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, first.Body.String(), retry.Body.String())
	// A new HTTP key for the same order: the charge function still runs once.
	again := pay("k2", `{"order":"o-1","amount_cents":250}`)
	require.Equal(t, http.StatusCreated, again.Code)
	require.Empty(t, again.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, first.Body.String(), again.Body.String(), "the charge's stored receipt")
	require.Equal(t, http.StatusUnprocessableEntity, pay("k1", `{"order":"o-1","amount_cents":999}`).Code)
}
