package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracingFromTheEnvironment: tracing is on only when the standard
// OTEL_* variables ask for it, over OTLP/HTTP; anything else is a clear
// configuration error.
func TestTracingFromTheEnvironment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, off := range []func(string) (string, bool){env(), env("OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")} {
		tp, err := tracing(ctx, off)
		require.NoError(t, err)
		require.Nil(t, tp)
	}
	for _, on := range []func(string) (string, bool){
		env("OTEL_TRACES_EXPORTER", "otlp"),
		env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
		env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
	} {
		tp, err := tracing(ctx, on)
		require.NoError(t, err)
		require.NotNil(t, tp)
		require.NoError(t, tp.Shutdown(ctx))
	}
	_, err := tracing(ctx, env("OTEL_TRACES_EXPORTER", "zipkin"))
	require.ErrorContains(t, err, `OTEL_TRACES_EXPORTER="zipkin": want otlp (OTLP over HTTP) or none`)
	_, err = tracing(ctx, env("OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"))
	require.ErrorContains(t, err, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": the worker exports traces over OTLP/HTTP only`)
}

// Collector is a fake OTLP/HTTP collector (for the tests of both cli
// and cli_test): it keeps what is posted to
// /v1/traces.
type Collector struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/v1/traces" {
		c.mu.Lock()
		c.bodies = append(c.bodies, body)
		c.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// Spans decodes what it has been posted.
func (c *Collector) Spans(t *testing.T) []*tracepb.Span {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, b := range c.bodies {
		var req coltracepb.ExportTraceServiceRequest
		require.NoError(t, proto.Unmarshal(b, &req))
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

// Received is all it has been posted, concatenated.
func (c *Collector) Received() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.bodies, nil)
}
