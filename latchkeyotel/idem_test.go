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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// payTwice sends one payment three times with one key through the
// middleware with the observer; wrap, if set, starts each request's span as
// otelhttp would.
func payTwice(t *testing.T, r *recorded, wrap func(http.Handler) http.Handler) (key, principal string) {
	t.Helper()
	runs := 0
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithObserver(r.tel.HTTPObserver("pay")))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"charge":"ch_secret_body"}`)
		}))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	key, principal = "pay-key-5521", "Bearer tok-principal-9"
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
	return key, principal
}

// idemTrail returns the outcome attribute and the number of replay events
// of each span.
func idemTrail(spans []sdktrace.ReadOnlySpan) (outcomes []string, replays int) {
	for _, s := range spans {
		v, _ := attr(s, "latchkey.idem.outcome")
		outcomes = append(outcomes, v.AsString())
		for _, e := range s.Events() {
			if e.Name == "latchkey.idem.replayed" {
				replays++
			}
		}
	}
	return outcomes, replays
}

// TestHTTPReplayEvent sends one payment three times with one key under
// request spans: the first runs, the copies replay; each outcome is an
// attribute of the request's own span, each replay an event on it, no span
// is added, and no key, principal or body reaches an attribute.
func TestHTTPReplayEvent(t *testing.T) {
	r := newRecorded(t)
	tracer := r.tp.Tracer("test")
	key, principal := payTwice(t, r, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			ctx, span := tracer.Start(req.Context(), "POST /pay", trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			next.ServeHTTP(w, req.WithContext(ctx))
		})
	})
	reqs := r.ended("POST /pay")
	if len(reqs) != 3 || len(r.spans.Ended()) != 3 {
		t.Fatalf("%d request spans of %d spans; want 3 and no other", len(reqs), len(r.spans.Ended()))
	}
	outcomes, replays := idemTrail(reqs)
	if fmt.Sprint(outcomes) != "[executed replayed replayed]" {
		t.Errorf("outcomes %v", outcomes)
	}
	if replays != 2 {
		t.Errorf("%d replay events on request spans, want 2", replays)
	}
	r.noSecrets(t, key, strings.TrimPrefix(principal, "Bearer "), "ch_secret_body", `"amount"`)
	if n := r.sum(t, "latchkey.idem.requests", attribute.String("latchkey.idem.handler", "pay"),
		attribute.String("latchkey.idem.outcome", "replayed")); n != 2 {
		t.Errorf("replayed count %d, want 2", n)
	}
}

// TestHTTPOwnSpan checks that a request without a recording span gets a
// span of its own, latchkey.idem.request, with the same attributes and
// events.
func TestHTTPOwnSpan(t *testing.T) {
	r := newRecorded(t)
	key, principal := payTwice(t, r, nil)
	spans := r.ended("latchkey.idem.request")
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	outcomes, replays := idemTrail(spans)
	if fmt.Sprint(outcomes) != "[executed replayed replayed]" || replays != 2 {
		t.Errorf("outcomes %v, %d replay events", outcomes, replays)
	}
	if v, _ := attr(spans[1], "http.response.status_code"); v.AsInt64() != http.StatusCreated {
		t.Errorf("replay's status %v", v.AsInt64())
	}
	r.noSecrets(t, key, strings.TrimPrefix(principal, "Bearer "), "ch_secret_body")
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
