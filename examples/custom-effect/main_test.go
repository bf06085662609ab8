package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestREADMEShowsThisExample keeps README.md's "Your own effect" in step with
// this file, which the build compiles.
func TestREADMEShowsThisExample(t *testing.T) {
	testenv.RequireREADMEShows(t, "examples/custom-effect")
}

// emailAPI is a fake email API that records what it is sent.
type emailAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	status   []int // answers, in turn; then 202
}

func newEmailAPI(t *testing.T, status ...int) *emailAPI {
	api := &emailAPI{status: status}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		api.mu.Lock()
		api.requests = append(api.requests, r)
		api.bodies = append(api.bodies, string(b))
		code := http.StatusAccepted
		if len(api.status) > 0 {
			code, api.status = api.status[0], api.status[1:]
		}
		api.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(api.Close)
	return api
}

func (a *emailAPI) sent() []*http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*http.Request(nil), a.requests...)
}

// setup runs the email effect behind the worker's real processor on an
// in-memory DynamoDB, as the worker would for each message.
func setup(t *testing.T, api *emailAPI) *process.Processor {
	t.Helper()
	db := memdynamo.New()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("exactly-dedup"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	settings := map[string]string{"EMAIL_API_URL": api.URL + "/send", "EMAIL_API_TOKEN": "s3cret"}
	eff, err := newSendEmail(effect.Env{
		HTTPClient: api.Client(),
		Lookup:     func(k string) (string, bool) { v, ok := settings[k]; return v, ok },
	})
	require.NoError(t, err)
	keys, err := dedup.ParseKeySource("auto")
	require.NoError(t, err)
	return &process.Processor{
		Store: dedup.NewStore(db, "exactly-dedup"), Effect: eff, Keys: keys,
		Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "exactly", Queue: m.QueueName} },
		Lease: 30 * time.Second, TTL: 24 * time.Hour, Log: slog.New(slog.DiscardHandler),
	}
}

func message(id, body string) effect.Message {
	return effect.Message{QueueName: "emails.fifo", ID: id, DedupID: "order-7-confirmation", Group: "customer-42", Body: body, ReceiveCount: 1}
}

const welcome = `{"to":"ada@example.com","template":"order-confirmation","order":"7"}`

// TestEmailIsSentOnce: a redelivery, and a producer's retry under a new
// MessageId, are recognised by the ledger: the API is called once, with the
// token from the secret and the dedup key as idempotency key.
func TestEmailIsSentOnce(t *testing.T) {
	t.Parallel()
	api := newEmailAPI(t)
	proc := setup(t, api)
	ctx := context.Background()

	first := proc.Process(ctx, message("m1", welcome), process.Hooks{})
	require.Equal(t, process.Delete, first.Action, "%v", first.Err)
	require.Equal(t, dedup.Won, first.Outcome)
	require.True(t, first.Applied)

	for _, again := range []effect.Message{message("m1", welcome), message("m2", welcome)} {
		r := proc.Process(ctx, again, process.Hooks{})
		require.Equal(t, process.Delete, r.Action)
		require.Equal(t, dedup.Duplicate, r.Outcome)
		require.False(t, r.Applied)
		require.JSONEq(t, `{"sent":true}`, string(r.Result), "the stored result, replayed")
	}

	sent := api.sent()
	require.Len(t, sent, 1, "one email")
	require.Equal(t, "/send", sent[0].URL.Path)
	require.Equal(t, "Bearer s3cret", sent[0].Header.Get("Authorization"))
	require.Equal(t, first.Key, sent[0].Header.Get("Idempotency-Key"))
	require.Equal(t, "exactly#emails.fifo#order-7-confirmation", first.Key)
	require.Equal(t, welcome, api.bodies[0])
}

// TestEmailFailuresSteerTheMessage: what the API answers decides retry or
// dead letter; a retry sends again with the same idempotency key.
func TestEmailFailuresSteerTheMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	api := newEmailAPI(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	proc := setup(t, api)
	r := proc.Process(ctx, message("m1", welcome), process.Hooks{})
	require.Equal(t, process.Retry, r.Action, "5xx: retried")
	require.Zero(t, r.After, "with the worker's backoff")
	r = proc.Process(ctx, message("m1", welcome), process.Hooks{})
	require.Equal(t, process.Retry, r.Action, "429: retried")
	require.Equal(t, time.Minute, r.After, "no sooner than a minute")
	r = proc.Process(ctx, message("m1", welcome), process.Hooks{})
	require.Equal(t, process.Delete, r.Action)
	require.True(t, r.Applied)
	sent := api.sent()
	require.Len(t, sent, 3)
	for _, req := range sent {
		require.Equal(t, r.Key, req.Header.Get("Idempotency-Key"), "every try carries the same key")
	}

	api = newEmailAPI(t, http.StatusUnprocessableEntity)
	proc = setup(t, api)
	r = proc.Process(ctx, message("m1", welcome), process.Hooks{})
	require.Equal(t, process.Fail, r.Action, "4xx: to the DLQ")
	require.True(t, effect.IsPermanent(r.Err))

	r = proc.Process(ctx, message("m2", ""), process.Hooks{})
	require.Equal(t, process.Fail, r.Action, "an empty body: to the DLQ")
	require.Len(t, api.sent(), 1, "and never sent")
}

// TestNewSendEmailNeedsItsSettings: a missing setting stops the worker at
// start-up (exit code 2, the message naming it); the effect uses the
// worker's HTTP client.
func TestNewSendEmailNeedsItsSettings(t *testing.T) {
	t.Parallel()
	for _, settings := range []map[string]string{
		{},
		{"EMAIL_API_URL": "https://api.example.com/send"},
		{"EMAIL_API_TOKEN": "s3cret"},
	} {
		_, err := newSendEmail(effect.Env{Lookup: func(k string) (string, bool) { v, ok := settings[k]; return v, ok }})
		require.ErrorContains(t, err, "EMAIL_API_URL and EMAIL_API_TOKEN are required", "%v", settings)
	}
	client := &http.Client{}
	eff, err := newSendEmail(effect.Env{HTTPClient: client, Lookup: func(k string) (string, bool) { return "x", true }})
	require.NoError(t, err)
	require.Same(t, client, eff.(sendEmail).client)
}
