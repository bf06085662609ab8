package process

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/exactly/effect"
)

// TracerName is the instrumentation scope of the worker's spans.
const TracerName = "github.com/exactlyonce/exactly"

// Attributes of the worker's spans, besides the messaging semantic
// conventions'.
const (
	AttrDedupKey  = attribute.Key("exactly.dedup_key")
	AttrOutcome   = attribute.Key("exactly.outcome") // won, duplicate, conflict, busy
	AttrAction    = attribute.Key("exactly.action")  // delete, retry, fail
	AttrGroup     = attribute.Key("exactly.message_group")
	AttrLeaseLost = attribute.Key("exactly.lease_lost")
	AttrCommit    = attribute.Key("exactly.commit") // claim or optimistic
	AttrRetries   = attribute.Key("exactly.commit_retries")
)

// traceContext is W3C Trace Context: traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// ProducerContext returns ctx carrying the producer's span context, when
// the message has one: a W3C traceparent message attribute (with its
// tracestate), else SQS's AWSTraceHeader system attribute (X-Ray). The
// message's span is its child.
func ProducerContext(ctx context.Context, m effect.Message) context.Context {
	if m.Attributes["traceparent"] != "" {
		return traceContext.Extract(ctx, propagation.MapCarrier(m.Attributes))
	}
	if sc, ok := xrayContext(m.AWSTraceHeader); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// xrayContext reads an X-Ray trace header,
// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".
func xrayContext(h string) (trace.SpanContext, bool) {
	var root, parent, sampled string
	for _, part := range strings.Split(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v
		}
	}
	p := strings.Split(root, "-")
	if len(p) != 3 || p[0] != "1" || len(p[1]) != 8 || len(p[2]) != 24 || len(parent) != 16 {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(p[1]+p[2])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(parent)); err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	if sampled == "1" {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}

// startMessage starts the message's span (a consumer's "process" span, a
// child of the producer's), when tracing is on.
func (p *Processor) startMessage(ctx context.Context, m effect.Message, receivedAt time.Time) (context.Context, trace.Span) {
	if p.Tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemAWSSQS,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(m.QueueName),
		semconv.MessagingMessageID(m.ID),
	}
	if m.Group != "" {
		attrs = append(attrs, AttrGroup.String(m.Group))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if !receivedAt.IsZero() {
		opts = append(opts, trace.WithTimestamp(receivedAt))
	}
	return p.Tracer.Start(ProducerContext(ctx, m), "process "+m.QueueName, opts...)
}

// endMessage ends the message's span with what came of the message.
func endMessage(span trace.Span, r Result) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrDedupKey.String(r.Key), AttrAction.String(r.Action.String()))
	if r.Outcome != 0 {
		span.SetAttributes(AttrOutcome.String(r.Outcome.String()))
	}
	if r.LeaseLost {
		span.SetAttributes(AttrLeaseLost.Bool(true))
	}
	if r.CommitRetries > 0 {
		span.SetAttributes(AttrRetries.Int(r.CommitRetries))
	}
	if r.Err != nil && r.Action != Delete {
		span.RecordError(r.Err)
		span.SetStatus(codes.Error, r.Action.String())
	}
	span.End()
}

// step starts a step's span (claim, effect, commit) under the message's,
// when tracing is on; end ends it with its error, if any.
func (p *Processor) step(ctx context.Context, name string) (context.Context, func(error)) {
	if p.Tracer == nil || !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return ctx, func(error) {}
	}
	ctx, span := p.Tracer.Start(ctx, name)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}
