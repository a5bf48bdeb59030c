package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/latchkeyotel"
)

// TestPaymentTrace pays one order twice with one key through an instance
// traced as serveCommand traces it (spans recorded in memory): the first
// payment's server span, continuing the caller's traceparent, holds the
// account lock's span and the executed outcome; the copy's has the replayed
// outcome and a replay event; no key, account, order or amount is in any attribute.
func TestPaymentTrace(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stormConfig()
	cfg.Telemetry = tel
	h := newHarness(t, harnessOptions{cfg: cfg})
	h.createAccount("acct-trace-ivy", 10_000_000)
	srv := httptest.NewServer(otelhttp.NewHandler(h.a.s.Handler(), "payment", otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.TraceContext{})))
	t.Cleanup(srv.Close)

	const traceID, callerID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	const key = "key-trace-5150"
	body := `{"order_id":"ord-trace-1","account":"acct-trace-ivy","amount":7654321}`
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Traceparent", "00-"+traceID+"-"+callerID+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Fatalf("payment %d: %d", i, resp.StatusCode)
		}
	}
	// The lease's spans end at Release, before the answer; the server
	// spans end right after it.
	var servers []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); len(servers) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		servers = servers[:0]
		for _, s := range spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				servers = append(servers, s)
			}
		}
	}
	if len(servers) != 2 {
		t.Fatalf("%d server spans, want 2", len(servers))
	}
	for _, s := range servers {
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != callerID {
			t.Errorf("server span %s does not continue the caller's trace", s.Name())
		}
	}
	first, copy := servers[0].SpanContext().SpanID(), servers[1]
	byName := map[string]int{}
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "latchkey.lock":
			if s.Parent().SpanID() != first {
				t.Errorf("%s is not under the first payment's server span", s.Name())
			}
			byName[s.Name()]++
		}
		for _, kv := range s.Attributes() {
			for _, secret := range []string{key, "acct-trace-ivy", "ord-trace-1", "7654321"} {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s: attribute %s holds %q", s.Name(), kv.Key, secret)
				}
			}
		}
	}
	if byName["latchkey.lock"] != 1 {
		t.Errorf("spans %v: want one lock span, the first payment's", byName)
	}
	for i, want := range []string{"executed", "replayed"} {
		var got string
		for _, kv := range servers[i].Attributes() {
			if kv.Key == "latchkey.idem.outcome" {
				got = kv.Value.AsString()
			}
		}
		if got != want {
			t.Errorf("server span %d: outcome %q, want %q", i, got, want)
		}
	}
	replayed := false
	for _, e := range copy.Events() {
		replayed = replayed || e.Name == "latchkey.idem.replayed"
	}
	if !replayed {
		t.Errorf("the copy's server span has no replay event: %v", copy.Events())
	}
}
