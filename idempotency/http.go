package idempotency

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
)

// HeaderKey is the request header of the IETF Idempotency-Key draft.
const HeaderKey = "Idempotency-Key"

// HeaderReplayed is set to "true" on a response replayed from the ledger.
const HeaderReplayed = "Idempotent-Replayed"

// MiddlewareConfig tunes Middleware. The zero value is usable.
type MiddlewareConfig struct {
	// Name keeps this API's keys apart from other functions' in the table;
	// defaults to "http".
	Name string
	// Required answers 400 to a request without the header; otherwise such a
	// request is served without idempotency.
	Required bool
	// Methods the middleware applies to. Defaults to POST and PATCH (the
	// methods that are not idempotent by definition).
	Methods []string
	// Client returns who sent the request (an API key, a user id) to scope
	// the key per client, as the draft asks. Defaults to nil: keys are
	// global.
	Client func(*http.Request) string
	// MaxBodyBytes bounds the request body read for the fingerprint. A
	// larger body is answered 413. Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes bounds the response body stored for replay; defaults
	// to MaxResultBytes (16 KiB), at most MaxResponseBytesLimit (368 KiB,
	// what one DynamoDB item of 400 KB holds with the headers and the
	// record). Past it a response is served once and not stored: its
	// retries get 422 (ProblemResponseNotStored). A stored response costs
	// its size in write units (1 per KB), and again in read units for each
	// replay. Middleware panics on a negative value or one past the limit.
	MaxResponseBytes int
}

// MaxResponseBytesLimit is the largest MiddlewareConfig.MaxResponseBytes:
// with up to MaxResultBytes of headers, the record stays inside DynamoDB's
// 400 KB item limit.
const MaxResponseBytesLimit = 368 << 10

// Middleware makes an HTTP API idempotent at its edge, per the IETF
// Idempotency-Key draft: the first request with a key runs the handler and
// its response (status, headers, body) is stored; a retry with the same key
// and the same request (method, path and body) gets the stored response,
// marked with Idempotent-Replayed: true, without running the handler. While
// the first still runs, a retry gets 409 Conflict with Retry-After (the
// hint of InProgressError.RetryAfter, in whole seconds, at least 1); a key
// reused for a different request gets 422 Unprocessable Content.
//
// The response is the handler's final status (200 and up); informational
// ones (1xx, such as 103 Early Hints) go to the client at once and are
// neither stored nor replayed. 5xx and 429 responses are not stored: the
// claim is released and a retry runs the handler again (so a handler must
// not answer 5xx after doing something it cannot do twice).
//
// A response body of up to MaxResponseBytes (16 KiB by default) is stored,
// headers up to MaxResultBytes more. A larger one is not: the request is recorded as done, and a
// retry gets 422 with an explanation, neither a wrong replay nor a second
// run, nor a 409 that would have the client retry for as long as the record
// lives.
//
// The response is held until its record is committed, so that a client
// never sees a response the ledger does not hold, unless the handler
// flushes (http.Flusher, http.ResponseController): what it has written so
// far then goes to the client, and the rest as it is written; the record
// is committed after the handler returns, as always. The writer unwraps to
// the server's (http.ResponseController's deadlines work); hijacking is
// refused.
func Middleware(l *Ledger, cfg MiddlewareConfig) func(http.Handler) http.Handler {
	if cfg.Name == "" {
		cfg.Name = "http"
	}
	if len(cfg.Methods) == 0 {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	switch {
	case cfg.MaxResponseBytes < 0 || cfg.MaxResponseBytes > MaxResponseBytesLimit:
		panic(fmt.Sprintf("idempotency: MiddlewareConfig.MaxResponseBytes (%d) must be between 0 (the default, %d) and MaxResponseBytesLimit (%d), what one DynamoDB item holds",
			cfg.MaxResponseBytes, MaxResultBytes, MaxResponseBytesLimit))
	case cfg.MaxResponseBytes == 0:
		cfg.MaxResponseBytes = MaxResultBytes
	}
	methods := map[string]bool{}
	for _, m := range cfg.Methods {
		methods[m] = true
	}
	scope := dedup.Scope{Namespace: l.cfg.Namespace, Queue: cfg.Name, PerGroup: true}
	proc := l.processor(l.cfg.Expiry, false, dedup.MaxStoredBytes)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !methods[r.Method] {
				next.ServeHTTP(w, r)
				return
			}
			raw := r.Header.Get(HeaderKey)
			if raw == "" {
				if cfg.Required {
					writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "the "+HeaderKey+" header is required for "+r.Method+" requests")
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBodyBytes))
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					writeProblem(w, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, fmt.Sprintf("the request body is larger than %d bytes (MiddlewareConfig.MaxBodyBytes)", cfg.MaxBodyBytes))
					return
				}
				writeProblem(w, http.StatusBadRequest, ProblemBodyUnreadable, "cannot read the request body")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			client := ""
			if cfg.Client != nil {
				client = cfg.Client(r)
			}
			key := scope.Key(client, raw)
			fp := hashOf(fmt.Appendf(nil, "%s\x00%s\x00%s", r.Method, r.URL.RequestURI(), body))

			rec := &recorder{w: w, header: http.Header{}, limit: cfg.MaxResponseBytes}
			res := l.run(r.Context(), proc, key, fp, func(ctx context.Context) (effect.Output, error) {
				next.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, keyCtx{}, key)))
				rec.final()
				if rec.status >= 500 || rec.status == http.StatusTooManyRequests {
					return effect.Output{}, errNotStored
				}
				stored, ok := rec.encode()
				if !ok {
					// Recorded as done without a result: a retry is told so.
					l.cfg.Logger.Warn("idempotency: response too large to store; retries get 422",
						"key", key, "body_bytes", rec.size, "max_body_bytes", rec.limit)
				}
				return effect.Output{Result: stored}, nil
			})
			switch {
			case res.Applied || errors.Is(res.Err, errNotStored):
				rec.writeTo(w)
				return
			}
			stored, err := verdict(res)
			var busy *InProgressError
			switch {
			case rec.streaming:
				// The handler ran and its response is out: nothing else can
				// be said to this client.
				l.cfg.Logger.Warn("idempotency: streamed response not recorded", "key", key, "err", err)
			case errors.As(err, &busy):
				w.Header().Set("Retry-After", strconv.Itoa(int(max((busy.RetryAfter+time.Second-1)/time.Second, 1))))
				writeProblem(w, http.StatusConflict, ProblemInProgress, "a request with this "+HeaderKey+" is still being processed")
			case errors.Is(err, ErrPayloadMismatch):
				writeProblem(w, http.StatusUnprocessableEntity, ProblemKeyReused, "this "+HeaderKey+" was used for a different request")
			case err != nil:
				l.cfg.Logger.Warn("idempotency: request not run", "key", key, "err", err)
				w.Header().Set("Retry-After", "1")
				writeProblem(w, http.StatusServiceUnavailable, ProblemNotRecorded, "the request could not be recorded; retry with the same "+HeaderKey)
			case len(stored) == 0:
				// Not 409 (in progress: retry later) nor 5xx (retry): the
				// request is done and no retry can get its response.
				writeProblem(w, http.StatusUnprocessableEntity, ProblemResponseNotStored, "a request with this "+HeaderKey+" was served, but its response was too large to replay")
			default:
				sr, err := decodeResponse(stored)
				if err != nil {
					l.cfg.Logger.Error("idempotency: cannot replay the stored response", "key", key, "err", err)
					writeProblem(w, http.StatusInternalServerError, ProblemReplayFailed, "cannot replay the stored response")
					return
				}
				for k, vs := range sr.header {
					w.Header()[k] = vs
				}
				w.Header().Set(HeaderReplayed, "true")
				w.WriteHeader(sr.status)
				_, _ = w.Write(sr.body)
			}
		})
	}
}

// The type of each problem Middleware answers with (RFC 9457 problem
// details, application/problem+json, as the Idempotency-Key draft does):
// a client tells the kinds of error apart by it, not by the text.
const (
	// ProblemKeyMissing: 400, the Idempotency-Key header is required
	// (MiddlewareConfig.Required) and absent.
	ProblemKeyMissing = "urn:exactly:idempotency:key-missing"
	// ProblemKeyReused: 422, the key was used for a different request
	// (method, path or body).
	ProblemKeyReused = "urn:exactly:idempotency:key-reused"
	// ProblemInProgress: 409 with Retry-After, the first request with the
	// key is still running.
	ProblemInProgress = "urn:exactly:idempotency:in-progress"
	// ProblemResponseNotStored: 422, the first request was served but its
	// response was too large to store, so no retry can get it.
	ProblemResponseNotStored = "urn:exactly:idempotency:response-not-stored"
	// ProblemNotRecorded: 503 with Retry-After, the ledger could not be
	// reached; the handler did not run.
	ProblemNotRecorded = "urn:exactly:idempotency:not-recorded"
	// ProblemBodyTooLarge: 413, the request body is past
	// MiddlewareConfig.MaxBodyBytes.
	ProblemBodyTooLarge = "urn:exactly:idempotency:body-too-large"
	// ProblemBodyUnreadable: 400, the request body could not be read.
	ProblemBodyUnreadable = "urn:exactly:idempotency:body-unreadable"
	// ProblemReplayFailed: 500, the stored response could not be decoded.
	ProblemReplayFailed = "urn:exactly:idempotency:replay-failed"
)

// writeProblem answers an RFC 9457 problem details object.
func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{typ, http.StatusText(status), status, detail})
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errNotStored marks a response that is passed on but not recorded.
var errNotStored = errors.New("idempotency: response not stored")

// recorder holds the handler's response until its record is committed, so
// that a client never sees a response the ledger does not hold; once the
// handler flushes, it streams instead, keeping what it can store.
type recorder struct {
	w           http.ResponseWriter // the client's
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
	size        int  // bytes written, kept or not
	limit       int  // MiddlewareConfig.MaxResponseBytes
	streaming   bool // flushed: status, headers and body so far went to w
}

func (r *recorder) Header() http.Header { return r.header }

// WriteHeader records the final status; an informational one (1xx but 101,
// as net/http has it) goes to the client now, with the headers set so far.
func (r *recorder) WriteHeader(code int) {
	if r.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := r.w.Header()
		outer := h.Clone()
		maps.Copy(h, r.header)
		r.w.WriteHeader(code)
		clear(h) // the final response has the headers of its own time
		maps.Copy(h, outer)
		return
	}
	r.status, r.wroteHeader = code, true
}

func (r *recorder) Write(b []byte) (int, error) {
	r.final()
	r.size += len(b)
	if !r.streaming {
		return r.body.Write(b)
	}
	if r.size <= r.limit {
		r.body.Write(b)
	} else {
		r.body.Reset() // too large to store: not kept
	}
	return r.w.Write(b)
}

// final makes the status 200 if the handler set none.
func (r *recorder) final() {
	if !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusOK, true
	}
}

// FlushError sends what is held and streams from then on.
func (r *recorder) FlushError() error {
	if !r.streaming {
		r.final()
		r.streaming = true
		if err := r.send(r.w); err != nil {
			return err
		}
		if r.size > r.limit {
			r.body.Reset()
		}
	}
	return http.NewResponseController(r.w).Flush()
}

func (r *recorder) Flush() { _ = r.FlushError() }

// Unwrap lets http.ResponseController reach the server's writer for what
// the recorder does not do itself (deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// Hijack refuses: a hijacked connection's response could be neither held
// nor stored.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, fmt.Errorf("idempotency: hijacking a connection under the middleware: %w", http.ErrNotSupported)
}

// writeTo sends the held response to w, unless it was streamed.
func (r *recorder) writeTo(w http.ResponseWriter) {
	if !r.streaming {
		_ = r.send(w)
	}
}

func (r *recorder) send(w http.ResponseWriter) error {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.status)
	_, err := w.Write(r.body.Bytes())
	return err
}

// storedResponse is a response as the ledger holds it.
type storedResponse struct {
	status int
	header http.Header
	body   []byte
}

// storedFormat is the first byte of a stored response.
const storedFormat = 1

// encode is the stored form of the response: the format, the status, the
// headers (count, then each name and its values, lengths first) and the
// body's bytes as they are, so that the body's limit is its own size. ok is
// false when the body exceeds the limit or the headers MaxResultBytes: not
// stored.
func (r *recorder) encode() (stored []byte, ok bool) {
	if r.size > r.limit {
		return nil, false
	}
	b := []byte{storedFormat}
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendUvarint(b, uint64(len(r.header)))
	for k, vs := range r.header {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	if len(b) > MaxResultBytes {
		return nil, false
	}
	return append(b, r.body.Bytes()...), true
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeResponse reads a stored response (encode).
func decodeResponse(b []byte) (storedResponse, error) {
	bad := errors.New("idempotency: malformed stored response")
	if len(b) > 0 && b[0] == '{' {
		// The JSON form that versions before the binary one stored:
		// records live for Config.Expiry across an upgrade.
		var j struct {
			Status int         `json:"s"`
			Header http.Header `json:"h"`
			Body   []byte      `json:"b"`
		}
		if err := json.Unmarshal(b, &j); err != nil {
			return storedResponse{}, fmt.Errorf("%w: %w", bad, err)
		}
		return storedResponse{status: j.Status, header: j.Header, body: j.Body}, nil
	}
	if len(b) == 0 || b[0] != storedFormat {
		return storedResponse{}, bad
	}
	b = b[1:]
	next := func() (uint64, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, false
		}
		b = b[w:]
		return n, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	status, ok1 := next()
	keys, ok2 := next()
	if !ok1 || !ok2 || status < 200 || status > 999 || keys > uint64(len(b)) {
		return storedResponse{}, bad
	}
	sr := storedResponse{status: int(status), header: make(http.Header, keys)}
	for range keys {
		k, ok := str()
		n, ok2 := next()
		if !ok || !ok2 || n > uint64(len(b)) {
			return storedResponse{}, bad
		}
		vs := make([]string, n)
		for i := range vs {
			if vs[i], ok = str(); !ok {
				return storedResponse{}, bad
			}
		}
		sr.header[k] = vs
	}
	sr.body = b
	return sr, nil
}
