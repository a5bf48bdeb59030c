// Package otlpenv sets up OpenTelemetry tracing for latchkey's programs (the
// gateway, the payment example) from the standard OTEL_* environment
// variables, so that they export traces over OTLP exactly when an operator
// asks. The library's integration is latchkeyotel, which uses the API only;
// choosing an SDK and an exporter is a program's business, and this is it
// for ours.
package otlpenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ErrInvalid is wrapped by Start's error for an OTEL_* value it cannot use.
var ErrInvalid = errors.New("otlpenv: invalid setting")

// Enabled reports whether the environment asks for traces:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// OTEL_SDK_DISABLED is not "true", and OTEL_TRACES_EXPORTER is unset or
// "otlp".
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracing is a running tracer provider and what ends it.
type Tracing struct {
	// Provider is the program's tracer provider, also set as the global one.
	Provider trace.TracerProvider
	// Protocol is the OTLP protocol in use: "http/protobuf" or "grpc".
	Protocol string
	sdk      *sdktrace.TracerProvider
}

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds how long it may take.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.sdk.Shutdown(ctx) }

// Start returns nil, nil when Enabled is false. Otherwise it starts a
// batching tracer provider that exports over OTLP, sets it and the W3C
// trace-context and baggage propagators as the global ones, and returns
// it. The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" (the default) or "grpc"; the
// exporters read the endpoint, headers, timeout, TLS and compression
// variables themselves. The resource comes from OTEL_SERVICE_NAME (default
// service) and OTEL_RESOURCE_ATTRIBUTES. Errors: ErrInvalid for a protocol
// it does not know, or the exporter's.
func Start(ctx context.Context, service string) (*Tracing, error) {
	if !Enabled() {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch proto {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q; want http/protobuf or grpc", ErrInvalid, proto)
	}
	if err != nil {
		return nil, fmt.Errorf("otlpenv: %s exporter: %w", proto, err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(service)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("otlpenv: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Tracing{Provider: tp, Protocol: proto, sdk: tp}, nil
}
