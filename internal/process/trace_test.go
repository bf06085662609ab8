package process_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// traced puts a span recorder behind b's processor.
func traced(b *bundle) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	b.proc.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(process.TracerName)
	return rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		out[a.Key] = a.Value.String()
	}
	return out
}

// spansByName returns the ended spans, by name.
func spansByName(rec *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		out[s.Name()] = s
	}
	return out
}

// TestTraceOfAMessage: a message's span is a consumer span, a child of the
// producer's (its traceparent attribute), with the messaging conventions'
// attributes and what came of it; its claim, effect and commit are its
// children, and the effect's context carries the effect's span.
func TestTraceOfAMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := traced(b)
	var effectSpan trace.SpanContext
	b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
		effectSpan = trace.SpanFromContext(ctx).SpanContext()
		return effect.Output{}, nil
	}
	m := msg("1", "body")
	m.Attributes = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	received := time.Now().Add(-3 * time.Second)
	r := b.proc.Process(context.Background(), m, process.Hooks{ReceivedAt: received})
	require.Equal(t, process.Delete, r.Action)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", r.TraceID)
	require.Len(t, r.SpanID, 16)

	spans := spansByName(rec)
	require.Len(t, spans, 4)
	top := spans["process q.fifo"]
	require.NotNil(t, top)
	require.Equal(t, trace.SpanKindConsumer, top.SpanKind())
	require.True(t, top.StartTime().Equal(received), "the span starts at the receive: the wait for its turn is in it")
	require.Equal(t, top.SpanContext().SpanID().String(), r.SpanID, "the logs name the message's span")
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", top.SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", top.Parent().SpanID().String(), "a child of the producer's span")
	a := attrs(top)
	require.Equal(t, "aws_sqs", a["messaging.system"])
	require.Equal(t, "process", a["messaging.operation.type"])
	require.Equal(t, "q.fifo", a["messaging.destination.name"])
	require.Equal(t, "1", a["messaging.message.id"])
	require.Equal(t, "g", a["exactly.message_group"])
	require.Equal(t, "won", a["exactly.outcome"])
	require.Equal(t, "delete", a["exactly.action"])
	require.Equal(t, r.Key, a["exactly.dedup_key"])
	for _, name := range []string{"claim", "effect", "commit"} {
		require.Contains(t, spans, name)
		require.Equal(t, top.SpanContext().SpanID(), spans[name].Parent().SpanID(), name)
	}
	require.Equal(t, spans["effect"].SpanContext(), effectSpan, "the effect runs in its span")

	// A duplicate: its span says so; no effect span.
	rec2 := traced(b)
	d := b.proc.Process(context.Background(), msg("1", "body"), process.Hooks{})
	require.Equal(t, process.Delete, d.Action)
	spans = spansByName(rec2)
	require.Equal(t, "duplicate", attrs(spans["process q.fifo"])["exactly.outcome"])
	require.NotContains(t, spans, "effect")
	require.False(t, spans["process q.fifo"].Parent().IsValid(), "no producer context: a root span")
}

// TestTraceFromXRay: SQS's AWSTraceHeader (set by producers traced with
// X-Ray) parents the message's span when there is no traceparent.
func TestTraceFromXRay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := traced(b)
	m := msg("1", "body")
	m.AWSTraceHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	b.proc.Process(context.Background(), m, process.Hooks{})
	top := spansByName(rec)["process q.fifo"]
	require.Equal(t, "5759e988bd862e3fe1be46a994272793", top.SpanContext().TraceID().String())
	require.Equal(t, "53995c3f42cd8ad8", top.Parent().SpanID().String())
	require.True(t, top.Parent().IsRemote())

	for _, bad := range []string{"Root=1-5759e988-bd86;Parent=53995c3f42cd8ad8", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", "garbage"} {
		rec := traced(b)
		m := msg("x"+bad, "body")
		m.AWSTraceHeader = bad
		b.proc.Process(context.Background(), m, process.Hooks{})
		require.False(t, spansByName(rec)["process q.fifo"].Parent().IsValid(), bad)
	}
}

// TestTraceOptimistic: optimistic mode has no claim span; a permanent
// failure marks the message's span as an error.
func TestTraceOptimistic(t *testing.T) {
	t.Parallel()
	b, _ := optimistic(t)
	rec := traced(b)
	b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
	spans := spansByName(rec)
	require.Contains(t, spans, "effect")
	require.Contains(t, spans, "commit")
	require.NotContains(t, spans, "claim")

	rec = traced(b)
	r := b.proc.Process(context.Background(), msg("2", `{"account":"a1"}`), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	top := spansByName(rec)["process q.fifo"]
	require.Equal(t, "Error", top.Status().Code.String())
	require.Equal(t, "fail", attrs(top)["exactly.action"])
}
