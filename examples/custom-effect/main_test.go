package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/worker"
)

// TestDocShowsThisExample keeps docs/LIBRARY.md's "Your own effect" in step with
// this file, which the build compiles.
func TestDocShowsThisExample(t *testing.T) {
	testenv.RequireDocShows(t, "docs/LIBRARY.md", "examples/custom-effect")
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

// harness runs the email effect behind the worker's real processor on an
// in-memory ledger (the test kit), as the worker would for each message.
func harness(t *testing.T, api *emailAPI) *exactlytest.Harness {
	t.Helper()
	settings := map[string]string{"EMAIL_API_URL": api.URL + "/send", "EMAIL_API_TOKEN": "s3cret"}
	eff, err := newSendEmail(worker.Env{
		HTTPClient: api.Client(),
		Lookup:     func(k string) (string, bool) { v, ok := settings[k]; return v, ok },
	})
	require.NoError(t, err)
	return exactlytest.New(t, eff)
}

func message(id, body string) effect.Message {
	return exactlytest.Msg(body, exactlytest.DedupID("order-7-confirmation"), exactlytest.Group("customer-42"),
		func(m *effect.Message) { m.ID, m.QueueName = id, "emails.fifo" })
}

const welcome = `{"to":"ada@example.com","template":"order-confirmation","order":"7"}`

// TestEmailIsSentOnce: a redelivery, and a producer's retry under a new
// MessageId, are recognised by the ledger: the API is called once, with the
// token from the secret and the dedup key as idempotency key.
func TestEmailIsSentOnce(t *testing.T) {
	t.Parallel()
	api := newEmailAPI(t)
	h := harness(t, api)

	first := h.RequireApplied(message("m1", welcome))
	for _, again := range []effect.Message{message("m1", welcome), message("m2", welcome)} {
		r := h.RequireDuplicate(again)
		require.JSONEq(t, `{"sent":true}`, string(r.Result), "the stored result, replayed")
	}

	sent := api.sent()
	require.Len(t, sent, 1, "one email")
	require.Equal(t, "/send", sent[0].URL.Path)
	require.Equal(t, "Bearer s3cret", sent[0].Header.Get("Authorization"))
	require.Equal(t, first.Key, sent[0].Header.Get("Idempotency-Key"))
	require.Equal(t, "exactly#emails.fifo#order-7-confirmation", first.Key)
	require.Equal(t, welcome, api.bodies[0]) //nolint:testifylint // the body is passed on byte for byte, not only as the same JSON
}

// TestEmailFailuresSteerTheMessage: what the API answers decides retry or
// dead letter; a retry sends again with the same idempotency key.
func TestEmailFailuresSteerTheMessage(t *testing.T) {
	t.Parallel()
	api := newEmailAPI(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	h := harness(t, api)
	r := h.RequireRetry(message("m1", welcome))
	require.Zero(t, effect.RetryDelay(r.Err), "5xx: retried with the worker's backoff")
	r = h.RequireRetry(message("m1", welcome))
	require.Equal(t, time.Minute, effect.RetryDelay(r.Err), "429: no sooner than a minute")
	r = h.RequireApplied(message("m1", welcome))
	sent := api.sent()
	require.Len(t, sent, 3)
	for _, req := range sent {
		require.Equal(t, r.Key, req.Header.Get("Idempotency-Key"), "every try carries the same key")
	}

	api = newEmailAPI(t, http.StatusUnprocessableEntity)
	h = harness(t, api)
	r = h.RequireFailed(message("m1", welcome))
	require.True(t, effect.IsPermanent(r.Err), "4xx: to the DLQ")

	h.RequireFailed(message("m2", "")) // an empty body: to the DLQ
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
		_, err := newSendEmail(worker.Env{Lookup: func(k string) (string, bool) { v, ok := settings[k]; return v, ok }})
		require.ErrorContains(t, err, "EMAIL_API_URL and EMAIL_API_TOKEN are required", "%v", settings)
	}
	client := &http.Client{}
	eff, err := newSendEmail(worker.Env{HTTPClient: client, Lookup: func(k string) (string, bool) { return "x", true }})
	require.NoError(t, err)
	require.Same(t, client, eff.(sendEmail).client)
}
