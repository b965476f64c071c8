package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingConfig configures OpenTelemetry tracing (docs/api.md, "Tracing"): off unless an OTLP
// endpoint is given.
type tracingConfig struct {
	endpoint string
	sample   float64
	service  string
}

func (c *tracingConfig) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.endpoint, "otlp-endpoint", "", "send traces to this OTLP/HTTP collector (such as http://127.0.0.1:4318; /v1/traces is added when the URL has no path); empty: tracing off")
	f.Float64Var(&c.sample, "trace-sample", 0.1, "the share of new traces recorded (0..1); a request whose W3C traceparent says sampled is always recorded")
	f.StringVar(&c.service, "trace-service", "rookery", "the service.name of the spans")
}

// start returns the tracer provider that exports to the endpoint (nil when tracing is off) and
// what flushes and stops it.
func (c *tracingConfig) start(ctx context.Context, role string) (_ trace.TracerProvider, stop func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	if c.endpoint == "" {
		return nil, nothing, nil
	}
	if c.sample < 0 || c.sample > 1 {
		return nil, nil, fmt.Errorf("--trace-sample must be between 0 and 1, not %v", c.sample)
	}
	u, err := url.Parse(c.endpoint)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, nil, fmt.Errorf("--otlp-endpoint %q is not an http(s) URL", c.endpoint)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", c.service), attribute.String("service.version", version),
		attribute.String("rookery.role", role))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.sample))))
	return tp, tp.Shutdown, nil
}
