package idemgrpc_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/metrics"
)

// The gRPC guard feeds the same Prometheus series and spans as idemhttp's,
// and never the key, the principal or the message.
func TestObserversShareIdemhttpInstrumentation(t *testing.T) {
	m, err := metrics.NewIdem()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []idemgrpc.Event
	prom, otel := idemgrpc.HTTPObserver(m.Observer("pay")), idemgrpc.HTTPObserver(tel.HTTPObserver("pay"))
	observe := func(ctx context.Context, e idemgrpc.Event) {
		prom(ctx, e)
		otel(ctx, e)
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	c := dial(t, serve(t, &paySvc{}, memstore.New(), idemgrpc.WithObserver(observe)))
	pay(t, c, "secret-key-1", "card 4242", "authorization", "Bearer secret-token")
	pay(t, c, "secret-key-1", "card 4242", "authorization", "Bearer secret-token")
	pay(t, c, "secret-key-1", "card 9999", "authorization", "Bearer secret-token")
	pay(t, c, "", "card 4242")

	want := map[string]float64{"executed": 1, "replayed": 1, "mismatch": 1, "bad_key": 1}
	if got := requestsByOutcome(t, reg); !maps.Equal(got, want) {
		t.Fatalf("latchkey_idem_requests_total by outcome %v, want %v", got, want)
	}
	wantCodes := []codes.Code{codes.OK, codes.OK, codes.FailedPrecondition, codes.InvalidArgument}
	for i, e := range events {
		if e.Code != wantCodes[i] || e.Method != unaryCall {
			t.Errorf("event %d: %+v, want code %v on %s", i, e, wantCodes[i], unaryCall)
		}
	}
	if len(spans.Ended()) != 4 {
		t.Fatalf("%d spans, want one per call", len(spans.Ended()))
	}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			if strings.Contains(v, "secret") || strings.Contains(v, "4242") {
				t.Fatalf("span %s carries %s=%q", s.Name(), kv.Key, v)
			}
		}
	}
	if e := events[1]; e.Outcome != idemhttp.OutcomeReplayed {
		t.Fatalf("second call's outcome %v, want replayed", e.Outcome)
	}
}

func requestsByOutcome(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "latchkey_idem_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && m.GetCounter().GetValue() > 0 {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}
