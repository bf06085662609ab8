package cli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/exactlyonce/exactly/internal/config"
)

// tracing is the OpenTelemetry SDK's tracer provider that the standard
// OTEL_* variables ask for, exporting over OTLP/HTTP; nil when tracing is
// off: OTEL_TRACES_EXPORTER unset with no OTLP endpoint set, or "none".
// The exporter reads the rest of OTEL_EXPORTER_OTLP_* (headers, timeout,
// TLS) and the SDK reads OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES
// themselves.
func tracing(ctx context.Context, lookup func(string) (string, bool)) (*sdktrace.TracerProvider, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	switch get("OTEL_TRACES_EXPORTER") {
	case "none":
		return nil, nil
	case "":
		if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, config.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp (OTLP over HTTP) or none", get("OTEL_TRACES_EXPORTER"))
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(k); p != "" && p != "http/protobuf" {
			return nil, config.Errorf("%s=%q: the worker exports traces over OTLP/HTTP only: want http/protobuf (the collector's port 4318)", k, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, config.Errorf("cannot set up the OTLP trace exporter from OTEL_EXPORTER_OTLP_*: %v", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceVersion(Version)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, config.Errorf("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %v", err)
	}
	// exactly-worker unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
	// name the service (the resource merged second wins).
	if merged, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("exactly-worker")), res); err == nil {
		res = merged
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// shutdownTracing flushes the spans still buffered, within a few seconds.
func shutdownTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("cannot flush the last spans", "err", err)
	}
}
