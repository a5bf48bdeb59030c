package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
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
	servers := waitServerSpans(t, spans)
	for _, s := range servers {
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != callerID {
			t.Errorf("server span %s does not continue the caller's trace", s.Name())
		}
	}
	first, copy := servers[0].SpanContext().SpanID(), servers[1]
	byName := map[string]int{}
	for _, s := range spans.Ended() {
		if s.Name() == "latchkey.lock" {
			if s.Parent().SpanID() != first {
				t.Errorf("%s is not under the first payment's server span", s.Name())
			}
			byName[s.Name()]++
		}
		noSecretAttributes(t, s, key, "acct-trace-ivy", "ord-trace-1", "7654321")
	}
	if byName["latchkey.lock"] != 1 {
		t.Errorf("spans %v: want one lock span, the first payment's", byName)
	}
	for i, want := range []string{"executed", "replayed"} {
		if got := outcome(servers[i]); got != want {
			t.Errorf("server span %d: outcome %q, want %q", i, got, want)
		}
	}
	if !slices.ContainsFunc(copy.Events(), func(e sdktrace.Event) bool { return e.Name == "latchkey.idem.replayed" }) {
		t.Errorf("the copy's server span has no replay event: %v", copy.Events())
	}
}

// waitServerSpans waits up to 10 s for the two payments' server spans,
// which end right after the answer (the lease's spans end at Release,
// before it).
func waitServerSpans(t *testing.T, spans *tracetest.SpanRecorder) []sdktrace.ReadOnlySpan {
	t.Helper()
	var servers []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); len(servers) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		servers = slices.DeleteFunc(spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.SpanKind() != trace.SpanKindServer })
	}
	if len(servers) != 2 {
		t.Fatalf("%d server spans, want 2", len(servers))
	}
	return servers
}

// outcome is the idempotency outcome a server span carries.
func outcome(s sdktrace.ReadOnlySpan) string {
	var got string
	for _, kv := range s.Attributes() {
		if kv.Key == "latchkey.idem.outcome" {
			got = kv.Value.AsString()
		}
	}
	return got
}

// noSecretAttributes checks that no attribute of s holds one of secrets.
func noSecretAttributes(t *testing.T, s sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	for _, kv := range s.Attributes() {
		for _, secret := range secrets {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s: attribute %s holds %q", s.Name(), kv.Key, secret)
			}
		}
	}
}
