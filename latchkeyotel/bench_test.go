package latchkeyotel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// benchTelemetry is a Telemetry on a real SDK whose batching processor
// exports to an exporter that drops the spans: the cost measured is the
// observers' and the SDK's, not a network's.
func benchTelemetry(b *testing.B, sample float64) *latchkeyotel.Telemetry {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(sample)))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tp), latchkeyotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	return tel
}

// BenchmarkLockPair is one acquire and release on memlock, without the
// observer, and with it at every trace and one trace in ten sampled: the
// differences are what tracing a lock pair costs.
func BenchmarkLockPair(b *testing.B) {
	for _, c := range []struct {
		name   string
		sample float64 // 0: no observer
	}{{"plain", 0}, {"sampled-all", 1}, {"sampled-tenth", 0.1}} {
		b.Run(c.name, func(b *testing.B) {
			l := memlock.New()
			if c.sample > 0 {
				l.SetObserver(benchTelemetry(b, c.sample).LockObserver("mem"))
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := l.Acquire(ctx, "k", lock.WithTTL(time.Minute), lock.WithFixedTTL())
				if err != nil {
					b.Fatal(err)
				}
				_ = lease.Release(ctx)
			}
		})
	}
}

// BenchmarkHTTPObserver is the observer of one guarded request alone.
func BenchmarkHTTPObserver(b *testing.B) {
	o := benchTelemetry(b, 1).HTTPObserver("pay")
	r := httptest.NewRequest(http.MethodPost, "/pay", nil)
	e := idemhttp.Event{Outcome: idemhttp.OutcomeExecuted, Status: 201, Duration: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		o(r, e)
	}
}
