package idempotency_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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

// requireProblem: rec is an RFC 9457 problem details response of this
// status and type.
func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, typ string) {
	t.Helper()
	require.Equal(t, status, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), "%s", rec.Body)
	require.Equal(t, typ, p.Type)
	require.Equal(t, status, p.Status)
	require.Equal(t, http.StatusText(status), p.Title)
	require.NotEmpty(t, p.Detail)
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

	requireProblem(t, post(t, h, "k-1", `{"sku":"b"}`), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
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
	requireProblem(t, post(t, required, "", `{}`), http.StatusBadRequest, idempotency.ProblemKeyMissing)
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
		requireProblem(t, busy, http.StatusConflict, idempotency.ProblemInProgress)
		require.Equal(t, "1", busy.Header().Get("Retry-After"), "just started: try again soon, not after the lease's minute")
		time.Sleep(3 * time.Second)
		require.Equal(t, "3", post(t, h, "k-1", `{}`).Header().Get("Retry-After"), "as long again as it has run")
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

// serve runs h on a loopback server for the tests that need a real
// connection (1xx responses, streaming).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// postTo POSTs body with key to srv and returns the response, its body and
// the informational statuses seen before it.
func postTo(t *testing.T, srv *httptest.Server, key, body string) (*http.Response, string, []int) {
	t.Helper()
	var infos []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { infos = append(infos, code); return nil },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(idempotency.HeaderKey, key)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b), infos
}

// TestMiddlewareEarlyHintsAreNotTheResponse: a 1xx is passed to the client
// and is not the response: a handler that sends 103 Early Hints and then
// fails with 503 is run again on the retry, and a 201 after a 103 is a 201.
func TestMiddlewareEarlyHintsAreNotTheResponse(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		if runs.Add(1) == 1 {
			http.Error(w, "downstream failed", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("created"))
	})
	srv := serve(t, idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api))

	resp, _, infos := postTo(t, srv, "k-1", `{}`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, []int{http.StatusEarlyHints}, infos, "the 103 reaches the client")

	resp, body, infos := postTo(t, srv, "k-1", `{}`)
	require.EqualValues(t, 2, runs.Load(), "the 503 was not stored: the retry runs the handler")
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the final status, not the 103's")
	require.Equal(t, "created", body)
	require.Equal(t, []int{http.StatusEarlyHints}, infos)

	resp, body, infos = postTo(t, srv, "k-1", `{}`)
	require.EqualValues(t, 2, runs.Load())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get(idempotency.HeaderReplayed))
	require.Equal(t, "</app.css>; rel=preload", resp.Header.Get("Link"))
	require.Equal(t, "created", body)
	require.Empty(t, infos, "a replay is the final response alone")
}

// TestMiddlewareBodyLimitIsTheBodysBytes: a body of MaxResultBytes bytes
// (binary: no encoding may inflate it past the limit) is replayed; a larger
// one is recorded as done and its retry gets 422, which says "do not retry
// this", never 409, which says "still in progress, retry later".
func TestMiddlewareBodyLimitIsTheBodysBytes(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	size := atomic.Int64{}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		b := make([]byte, size.Load())
		for i := range b {
			b[i] = byte(i * 7)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
	h := idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api)

	size.Store(idempotency.MaxResultBytes)
	first := post(t, h, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, first.Code)
	retry := post(t, h, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, retry.Code)
	require.Equal(t, "true", retry.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, first.Body.Bytes(), retry.Body.Bytes())
	require.EqualValues(t, 1, runs.Load())

	size.Store(idempotency.MaxResultBytes + 1)
	first = post(t, h, "k-2", `{}`)
	require.Equal(t, http.StatusCreated, first.Code, "the first caller gets its response")
	require.Len(t, first.Body.Bytes(), idempotency.MaxResultBytes+1)
	retry = post(t, h, "k-2", `{}`)
	requireProblem(t, retry, http.StatusUnprocessableEntity, idempotency.ProblemResponseNotStored)
	require.Empty(t, retry.Header().Get("Retry-After"))
	require.Contains(t, retry.Body.String(), "too large to replay")
	require.EqualValues(t, 2, runs.Load(), "recorded as done: not run again")
}

// TestMiddlewareMaxResponseBytes: a response past the default 16 KiB is
// served once and its retry gets 422; with MaxResponseBytes raised it is
// replayed; a limit past what a DynamoDB item holds is refused at once.
func TestMiddlewareMaxResponseBytes(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	body := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16) // 100 KiB
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
	l := newLedger(t, newDB(t))
	def := idempotency.Middleware(l, idempotency.MiddlewareConfig{Name: "default"})(api)
	require.Equal(t, http.StatusCreated, post(t, def, "k-1", `{}`).Code)
	requireProblem(t, post(t, def, "k-1", `{}`), http.StatusUnprocessableEntity, idempotency.ProblemResponseNotStored)

	raised := idempotency.Middleware(l, idempotency.MiddlewareConfig{Name: "raised", MaxResponseBytes: len(body)})(api)
	first := post(t, raised, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, first.Code)
	retry := post(t, raised, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, retry.Code)
	require.Equal(t, "true", retry.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, body, retry.Body.Bytes())
	require.EqualValues(t, 2, runs.Load(), "each key ran once")

	most := idempotency.Middleware(l, idempotency.MiddlewareConfig{Name: "most", MaxResponseBytes: idempotency.MaxResponseBytesLimit})
	body = bytes.Repeat([]byte{'x'}, idempotency.MaxResponseBytesLimit)
	require.Equal(t, http.StatusCreated, post(t, most(api), "k-1", `{}`).Code)
	retry = post(t, most(api), "k-1", `{}`)
	require.Equal(t, "true", retry.Header().Get(idempotency.HeaderReplayed), "the largest response is stored: %d", retry.Code)
	require.Len(t, retry.Body.Bytes(), idempotency.MaxResponseBytesLimit)

	for _, n := range []int{-1, idempotency.MaxResponseBytesLimit + 1} {
		require.PanicsWithValue(t, fmt.Sprintf("idempotency: MiddlewareConfig.MaxResponseBytes (%d) must be between 0 (the default, 16384) and MaxResponseBytesLimit (376832), what one DynamoDB item holds", n),
			func() { idempotency.Middleware(l, idempotency.MiddlewareConfig{MaxResponseBytes: n}) })
	}
}

// TestMiddlewareStreams: a handler that flushes streams its response under
// the middleware (http.Flusher and http.ResponseController both work), and
// the response is stored and replayed all the same.
func TestMiddlewareStreams(t *testing.T) {
	t.Parallel()
	read := make(chan struct{})
	hijack := make(chan error, 1)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			http.Error(w, "SetWriteDeadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("first\n"))
		if err := rc.Flush(); err != nil {
			http.Error(w, "Flush: "+err.Error(), http.StatusInternalServerError)
			return
		}
		<-read // the client has the first line before the handler goes on
		_, _ = w.Write([]byte("second\n"))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("third\n"))
		_, _, err := rc.Hijack()
		hijack <- err
	})
	srv := serve(t, idempotency.Middleware(newLedger(t, newDB(t)), idempotency.MiddlewareConfig{})(api))

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set(idempotency.HeaderKey, "k-1")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	lines := bufio.NewReader(resp.Body)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first\n", line, "flushed before the handler ended")
	close(read)
	rest, err := io.ReadAll(lines)
	require.NoError(t, err)
	require.Equal(t, "second\nthird\n", string(rest))
	require.Error(t, <-hijack, "the middleware holds the response: no hijacking under it")

	replay, body, _ := postTo(t, srv, "k-1", `{}`)
	require.Equal(t, http.StatusCreated, replay.StatusCode)
	require.Equal(t, "true", replay.Header.Get(idempotency.HeaderReplayed))
	require.Equal(t, "first\nsecond\nthird\n", body)
}
