// Package builtin holds the command line's built-in effects (--effect noop,
// ledger, http): demos and benchmarks of the worker, not part of the
// library a user imports.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/exactlyonce/exactly/effect"
)

// HTTPResultBodyLimit bounds the response body kept as the stored result.
const HTTPResultBodyLimit = 4 << 10

// HTTP posts each message body to URL: an exactly-once queue-to-HTTP bridge.
// The dedup key travels as the Idempotency-Key header, so a downstream that
// honours it stays exactly-once even if a stalled worker's lease is taken
// over. 2xx succeeds and its status and (bounded) body are stored and
// replayed for duplicates. Retryable (Retry-After honoured): 408, 409 (the
// same key still in progress downstream, as in the IETF Idempotency-Key
// draft), 425, 429, 5xx, transport errors, and 401/403 (the worker's own
// credentials: better to wait for a fix than to dead-letter every message).
// Any other status is permanent, 422 (the key reused for another payload)
// among them.
type HTTP struct {
	URL    string
	Client *http.Client
}

// HTTPResult is the stored result of the http effect.
type HTTPResult struct {
	Status int    `json:"status"`
	Body   string `json:"body,omitempty"`
}

// Apply posts the message.
func (h *HTTP) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewBufferString(in.Message.Body))
	if err != nil {
		return effect.Output{}, effect.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.Key)
	req.Header.Set("X-Message-Id", in.Message.ID)
	// The trace goes on downstream: W3C traceparent (and tracestate) of the
	// effect's span, when the worker traces.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if in.Message.Group != "" {
		req.Header.Set("X-Message-Group-Id", in.Message.Group)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return effect.Output{}, fmt.Errorf("POST %s: %w", h.URL, err) // retryable: transport or timeout
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or given up: nothing to report
	body, _ := io.ReadAll(io.LimitReader(resp.Body, HTTPResultBodyLimit))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		res, _ := json.Marshal(HTTPResult{Status: code, Body: string(body)})
		return effect.Output{Result: res}, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// The worker's own credentials are wrong: dead-lettering every
		// message until someone fixes them would be worse than waiting.
		return effect.Output{}, effect.RetryAfter(retryAfter(resp.Header.Get("Retry-After")),
			fmt.Errorf("POST %s: %s: the downstream refuses the worker's credentials", h.URL, resp.Status))
	case retryableStatus(code):
		return effect.Output{}, effect.RetryAfter(retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("POST %s: %s", h.URL, resp.Status))
	default:
		return effect.Output{}, effect.Permanent(fmt.Errorf("POST %s: %s", h.URL, resp.Status))
	}
}

// retryableStatus: a response that a later try can change. 409 is the IETF
// Idempotency-Key draft's "a request with this key is still in progress";
// 422 ("this key was used for another payload") is a conflict: permanent.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
