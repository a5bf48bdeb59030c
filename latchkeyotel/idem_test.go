package latchkeyotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// TestHTTPReplayEvent sends one payment three times with one key: the first
// runs, the copies replay. Every request's span gets a child span with its
// outcome, a replay is also an event on the request's own span, and no key,
// principal or body reaches an attribute.
func TestHTTPReplayEvent(t *testing.T) {
	r := newRecorded(t)
	runs := 0
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithObserver(r.tel.HTTPObserver("pay")))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"charge":"ch_secret_body"}`)
		}))
	// The request's own span, as otelhttp would start it.
	tracer := r.tp.Tracer("test")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, span := tracer.Start(req.Context(), "POST /pay", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, req.WithContext(ctx))
	}))
	defer srv.Close()
	const key, principal = "pay-key-5521", "Bearer tok-principal-9"
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", principal)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times", runs)
	}
	reqs := r.ended("POST /pay")
	inner := r.ended("latchkey.idem.request")
	if len(reqs) != 3 || len(inner) != 3 {
		t.Fatalf("%d request spans, %d idem spans; want 3 of each", len(reqs), len(inner))
	}
	var outcomes []string
	replayEvents := 0
	for i := range 3 {
		if inner[i].Parent().SpanID() != reqs[i].SpanContext().SpanID() {
			t.Errorf("idem span %d is not a child of its request's span", i)
		}
		v, _ := attr(inner[i], "latchkey.idem.outcome")
		outcomes = append(outcomes, v.AsString())
		for _, e := range reqs[i].Events() {
			if e.Name == "latchkey.idem.replayed" {
				replayEvents++
			}
		}
	}
	if fmt.Sprint(outcomes) != "[executed replayed replayed]" {
		t.Errorf("outcomes %v", outcomes)
	}
	if replayEvents != 2 {
		t.Errorf("%d replay events on request spans, want 2", replayEvents)
	}
	r.noSecrets(t, key, "tok-principal-9", "ch_secret_body", `"amount"`)
	if n := r.sum(t, "latchkey.idem.requests", attribute.String("latchkey.idem.handler", "pay"),
		attribute.String("latchkey.idem.outcome", "replayed")); n != 2 {
		t.Errorf("replayed count %d, want 2", n)
	}
}

// TestDoSpans runs idem.Do twice with one key: an executed and a replayed
// span, each under the caller's span.
func TestDoSpans(t *testing.T) {
	r := newRecorded(t)
	st := memstore.New()
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "charge")
	for range 2 {
		if _, err := idem.Do(ctx, st, "do-key-1", func(context.Context) (string, error) { return "ok", nil },
			idem.WithObserver(r.tel.DoObserver("charge"))); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	spans := r.ended("latchkey.idem.do")
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []string{"executed", "replayed"} {
		if v, _ := attr(spans[i], "latchkey.idem.outcome"); v.AsString() != want {
			t.Errorf("span %d outcome %q, want %q", i, v.AsString(), want)
		}
		if spans[i].Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d is not a child of the caller's span", i)
		}
	}
	r.noSecrets(t, "do-key-1")
}
