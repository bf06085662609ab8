package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// "http" if empty.
	Name string
	// Required answers 400 to a request without the header; otherwise such a
	// request is served without idempotency.
	Required bool
	// Methods the middleware applies to; POST and PATCH if empty (the
	// methods that are not idempotent by definition).
	Methods []string
	// Client returns who sent the request (an API key, a user id) to scope
	// the key per client, as the draft asks; keys are global if nil.
	Client func(*http.Request) string
	// MaxBodyBytes bounds the request body read for the fingerprint; 1 MiB
	// if 0. A larger body is answered 413.
	MaxBodyBytes int64
}

// Middleware makes an HTTP API idempotent at its edge, per the IETF
// Idempotency-Key draft: the first request with a key runs the handler and
// its response (status, headers, body) is stored; a retry with the same key
// and the same request (method, path and body) gets the stored response,
// marked with Idempotent-Replayed: true, without running the handler. While
// the first still runs, a retry gets 409 Conflict with Retry-After; a key
// reused for a different request gets 422 Unprocessable Content.
//
// 5xx and 429 responses are not stored: the claim is released and a retry
// runs the handler again (so a handler must not answer 5xx after doing
// something it cannot do twice). A response body larger than MaxResultBytes
// is not stored either: the request is recorded as done, and a retry gets
// 409 with an explanation instead of a wrong replay.
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
	methods := map[string]bool{}
	for _, m := range cfg.Methods {
		methods[m] = true
	}
	scope := dedup.Scope{Namespace: l.cfg.Namespace, Queue: cfg.Name, PerGroup: true}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !methods[r.Method] {
				next.ServeHTTP(w, r)
				return
			}
			raw := r.Header.Get(HeaderKey)
			if raw == "" {
				if cfg.Required {
					http.Error(w, "the "+HeaderKey+" header is required for "+r.Method+" requests", http.StatusBadRequest)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBodyBytes))
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "cannot read the request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			client := ""
			if cfg.Client != nil {
				client = cfg.Client(r)
			}
			key := scope.Key(client, raw)
			fp := hashOf(fmt.Appendf(nil, "%s\x00%s\x00%s", r.Method, r.URL.RequestURI(), body))

			rec := &recorder{header: http.Header{}, status: http.StatusOK}
			res := l.run(r.Context(), key, fp, l.cfg.Expiry, false, func(ctx context.Context) (effect.Output, error) {
				next.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, keyCtx{}, key)))
				if rec.status >= 500 || rec.status == http.StatusTooManyRequests {
					return effect.Output{}, errNotStored
				}
				b, err := json.Marshal(storedResponse{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()})
				if err != nil {
					return effect.Output{}, err
				}
				return effect.Output{Result: b}, nil
			})
			switch {
			case res.Applied || errors.Is(res.Err, errNotStored):
				rec.writeTo(w)
				return
			}
			stored, err := verdict(res)
			var busy *InProgressError
			switch {
			case errors.As(err, &busy):
				w.Header().Set("Retry-After", strconv.Itoa(int(max(busy.RetryAfter.Round(time.Second)/time.Second, 1))))
				http.Error(w, "a request with this "+HeaderKey+" is still being processed", http.StatusConflict)
			case errors.Is(err, ErrPayloadMismatch):
				http.Error(w, "this "+HeaderKey+" was used for a different request", http.StatusUnprocessableEntity)
			case err != nil:
				l.cfg.Logger.Warn("idempotency: request not run", "key", key, "err", err)
				w.Header().Set("Retry-After", "1")
				http.Error(w, "the request could not be recorded; retry with the same "+HeaderKey, http.StatusServiceUnavailable)
			case len(stored) == 0:
				http.Error(w, "a request with this "+HeaderKey+" was served, but its response was too large to replay", http.StatusConflict)
			default:
				var sr storedResponse
				if err := json.Unmarshal(stored, &sr); err != nil {
					http.Error(w, "cannot replay the stored response", http.StatusInternalServerError)
					return
				}
				for k, vs := range sr.Header {
					w.Header()[k] = vs
				}
				w.Header().Set(HeaderReplayed, "true")
				w.WriteHeader(sr.Status)
				_, _ = w.Write(sr.Body)
			}
		})
	}
}

// errNotStored marks a response that is passed on but not recorded.
var errNotStored = errors.New("idempotency: response not stored")

type storedResponse struct {
	Status int         `json:"s"`
	Header http.Header `json:"h,omitempty"`
	Body   []byte      `json:"b,omitempty"`
}

// recorder holds the handler's response until its record is committed, so
// that a client never sees a response the ledger does not hold.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	return r.body.Write(b)
}

func (r *recorder) writeTo(w http.ResponseWriter) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
