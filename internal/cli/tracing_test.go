package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
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

