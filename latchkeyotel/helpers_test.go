package latchkeyotel_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchkey-go/latchkey/latchkeyotel"
)

// recorded is a Telemetry wired to an in-memory span recorder and a manual
// metric reader, the SDK's own test doubles: they keep what a real exporter
// would send.
type recorded struct {
	tel    *latchkeyotel.Telemetry
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

func newRecorded(t *testing.T, opts ...latchkeyotel.Option) *recorded {
	t.Helper()
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() { _ = r.tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	tel, err := latchkeyotel.New(append([]latchkeyotel.Option{
		latchkeyotel.WithTracerProvider(r.tp), latchkeyotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

// ended returns the ended spans named name.
func (r *recorded) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// collect collects the metrics recorded so far.
func (r *recorded) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// metrics collects the metrics recorded so far, by name.
func (r *recorded) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	out := map[string]metricdata.Aggregation{}
	for _, sm := range r.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum returns the value of the counter name's point with exactly attrs.
func (r *recorded) sum(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := r.metrics(t)[name].(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	want := attribute.NewSet(attrs...)
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// histCount returns the count of the histogram name's point with exactly
// attrs.
func (r *recorded) histCount(t *testing.T, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := r.metrics(t)[name].(metricdata.Histogram[float64])
	if !ok {
		return 0
	}
	want := attribute.NewSet(attrs...)
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Count
		}
	}
	return 0
}

// attr returns the span's attribute key, and whether it has one.
func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// noSecrets fails if any attribute of any span, event or metric point holds
// one of secrets: keys, tokens, principals and bodies never become
// attributes.
func (r *recorded) noSecrets(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range r.spans.Ended() {
		noSecretsIn(t, "span "+s.Name(), s.Attributes(), secrets)
		for _, e := range s.Events() {
			noSecretsIn(t, "event "+e.Name+" of "+s.Name(), e.Attributes, secrets)
		}
		for _, s2 := range secrets {
			if strings.Contains(s.Name(), s2) || strings.Contains(s.Status().Description, s2) {
				t.Errorf("span %s (status %q) holds %q", s.Name(), s.Status().Description, s2)
			}
		}
	}
	for _, sm := range r.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range pointAttributes(m.Data) {
				noSecretsIn(t, "metric "+m.Name, set.ToSlice(), secrets)
			}
		}
	}
}

// noSecretsIn fails if an attribute of kvs, found where, holds one of
// secrets.
func noSecretsIn(t *testing.T, where string, kvs []attribute.KeyValue, secrets []string) {
	t.Helper()
	for _, kv := range kvs {
		v := kv.Value.String()
		for _, s := range secrets {
			if s != "" && strings.Contains(v, s) {
				t.Errorf("%s: attribute %s = %q holds %q", where, kv.Key, v, s)
			}
		}
	}
}

// pointAttributes returns the attribute sets of the points of d, a counter
// or a histogram as latchkeyotel records them.
func pointAttributes(d metricdata.Aggregation) []attribute.Set {
	var sets []attribute.Set
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}
