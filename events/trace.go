package events

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rookery/rookery"
)

// Tracing: an event carries the W3C traceparent of the span that made it (rookery.Event.Trace), and
// the runner handles it in a span of that trace (Runner.Tracing), so a request, the events it
// caused and every consumer that handled them (and the events those made) are one trace.

// TraceParent returns the W3C traceparent of ctx's span, or "" if ctx has no valid one.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// startHandling starts the span of one delivery of ev to group, as a child of the span that made
// ev (if it carries one).
func startHandling(ctx context.Context, tracer trace.Tracer, group string, ev rookery.Event, attempt int) (context.Context, trace.Span) {
	if ev.Trace != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": ev.Trace})
	}
	ctx, span := tracer.Start(ctx, group+" "+ev.Type, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.consumer.group.name", group),
			attribute.String("messaging.message.id", ev.ID),
			attribute.String("rookery.event.key", ev.Key),
			attribute.Int("rookery.event.attempt", attempt))
	}
	return ctx, span
}

// endHandling ends span with the handler's outcome.
func endHandling(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, rookery.KindOf(err).String())
	}
	span.End()
}
