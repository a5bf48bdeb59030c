package idemhttp_test

import (
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/internal/flakystore"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// TestObserverAndLogger checks the outcome reported for a handler that
// panics (released, not recorded) and for one whose response could not be
// recorded (executed, with the store's error), and that the error record
// goes to WithLogger's logger without the key or the body.
func TestObserverAndLogger(t *testing.T) {
	var (
		mu     sync.Mutex
		events []idemhttp.Event
		logs   strings.Builder
	)
	observe := func(_ *http.Request, e idemhttp.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
	})
	unrecordable := flakystore.New(memstore.New(), errors.New("connection reset")) // gone between claim and record
	unrecordable.RecordFails.Store(math.MaxInt32)
	h := idemhttp.Middleware(unrecordable, idemhttp.WithObserver(observe), idemhttp.WithLogger(logger))(app)
	send := func(path string) {
		defer func() { _ = recover() }() // the panic goes on to net/http
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"card":"4242424242424242"}`))
		r.Header.Set("Idempotency-Key", "secret-key-81f2")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	send("/panic")
	send("/pay")

	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2: %+v", len(events), events)
	}
	if e := events[0]; e.Outcome != idemhttp.OutcomeReleased || e.Err != nil {
		t.Errorf("panicking handler: %+v, want released", e)
	}
	if e := events[1]; e.Outcome != idemhttp.OutcomeExecuted || e.Status != http.StatusCreated || e.Err == nil {
		t.Errorf("unrecorded response: %+v, want executed 201 with the store's error", e)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "connection reset") {
		t.Errorf("no error record for the failed record: %q", out)
	}
	if strings.Contains(out, "secret-key-81f2") || strings.Contains(out, "4242") {
		t.Errorf("the key or the body reached the log: %q", out)
	}
}
