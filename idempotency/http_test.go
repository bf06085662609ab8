package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/idempotency"
)

// orders is an API that creates an order per POST and counts them.
type orders struct {
	created atomic.Int32
	status  atomic.Int32 // answer this instead of 201 when set
	gate    chan struct{}
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.gate != nil {
		<-o.gate
	}
	if s := o.status.Load(); s != 0 {
		http.Error(w, "downstream failed", int(s))
		return
	}
	body, _ := io.ReadAll(r.Body)
	n := o.created.Add(1)
	w.Header().Set("Location", "/orders/"+string(rune('0'+n)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"order":` + string(body) + `,"key":"` + idempotency.Key(r.Context()) + `"}`))
}

func post(t *testing.T, h http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestMiddlewareReplaysTheStoredResponse(t *testing.T) {
	t.Parallel()
	api := &orders{}
	h := idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api)

	first := post(t, h, "k-1", `{"sku":"a"}`)
	require.Equal(t, http.StatusCreated, first.Code)
	require.Empty(t, first.Header().Get(idempotency.HeaderReplayed))
	require.Contains(t, first.Body.String(), `"key":"idempotency#http##k-1"`, "the handler sees the key")

	retry := post(t, h, "k-1", `{"sku":"a"}`)
	require.Equal(t, http.StatusCreated, retry.Code)
	require.Equal(t, "true", retry.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, first.Header().Get("Location"), retry.Header().Get("Location"))
	require.Equal(t, first.Header().Get("Content-Type"), retry.Header().Get("Content-Type"))
	require.Equal(t, first.Body.String(), retry.Body.String())
	require.EqualValues(t, 1, api.created.Load())

	require.Equal(t, http.StatusUnprocessableEntity, post(t, h, "k-1", `{"sku":"b"}`).Code, "the key reused for another request")
	require.Equal(t, http.StatusCreated, post(t, h, "k-2", `{"sku":"b"}`).Code)
	require.EqualValues(t, 2, api.created.Load())
}

func TestMiddlewareWithoutKey(t *testing.T) {
	t.Parallel()
	api := &orders{}
	l := newLedger(t, newDB(t))
	optional := idempotency.Middleware(l, idempotency.MiddlewareConfig{})(api)
	require.Equal(t, http.StatusCreated, post(t, optional, "", `{}`).Code)
	require.Equal(t, http.StatusCreated, post(t, optional, "", `{}`).Code)
	require.EqualValues(t, 2, api.created.Load())

	required := idempotency.Middleware(l, idempotency.MiddlewareConfig{Required: true})(api)
	require.Equal(t, http.StatusBadRequest, post(t, required, "", `{}`).Code)
	require.EqualValues(t, 2, api.created.Load())

	get := httptest.NewRecorder()
	required.ServeHTTP(get, httptest.NewRequest(http.MethodGet, "/orders", nil))
	require.Equal(t, http.StatusCreated, get.Code, "GET is not guarded")
}

func TestMiddlewareInProgressIs409(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		api := &orders{gate: make(chan struct{})}
		h := idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api)
		done := make(chan int, 1)
		go func() { done <- post(t, h, "k-1", `{}`).Code }()
		synctest.Wait()
		busy := post(t, h, "k-1", `{}`)
		require.Equal(t, http.StatusConflict, busy.Code)
		require.NotEmpty(t, busy.Header().Get("Retry-After"))
		close(api.gate)
		require.Equal(t, http.StatusCreated, <-done)
		require.EqualValues(t, 1, api.created.Load())
	})
}

func TestMiddlewareServerErrorsAreNotStored(t *testing.T) {
	t.Parallel()
	api := &orders{}
	h := idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api)
	api.status.Store(http.StatusServiceUnavailable)
	require.Equal(t, http.StatusServiceUnavailable, post(t, h, "k-1", `{}`).Code)
	api.status.Store(0)
	retry := post(t, h, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, retry.Code, "the retry runs the handler")
	require.Empty(t, retry.Header().Get(idempotency.HeaderReplayed))

	api.status.Store(http.StatusBadRequest)
	require.Equal(t, http.StatusBadRequest, post(t, h, "k-2", `{}`).Code)
	api.status.Store(0)
	replay := post(t, h, "k-2", `{}`)
	require.Equal(t, http.StatusBadRequest, replay.Code, "a 4xx is the request's answer: stored")
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
}

func TestMiddlewareScopesKeysPerClient(t *testing.T) {
	t.Parallel()
	api := &orders{}
	h := idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{
		Client: func(r *http.Request) string { return r.Header.Get("X-Client") },
	})(api)
	for _, client := range []string{"alice", "bob", "alice"} {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderKey, "k-1")
		req.Header.Set("X-Client", client)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.EqualValues(t, 2, api.created.Load(), "one key, two clients")
}
