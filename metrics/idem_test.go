package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// faultyStore fails Claim or Record on demand, as an unreachable store
// would; idemtest checks the real stores, this checks what is counted.
type faultyStore struct {
	idem.Store
	mu                  sync.Mutex
	claimErr, recordErr error
}

func (s *faultyStore) set(claimErr, recordErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimErr, s.recordErr = claimErr, recordErr
}

func (s *faultyStore) Claim(ctx context.Context, key, fp string, d time.Duration) (idem.Claim, error) {
	s.mu.Lock()
	err := s.claimErr
	s.mu.Unlock()
	if err != nil {
		return idem.Claim{}, err
	}
	return s.Store.Claim(ctx, key, fp, d)
}

func (s *faultyStore) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	s.mu.Lock()
	err := s.recordErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.Record(ctx, key, token, result, retention)
}

// TestIdemMetrics drives the middleware through every outcome it counts
// (executed, replayed, 409, 422, 400, store errors) and checks each
// counter, that the keys appear nowhere in the exposition, and the lint.
func TestIdemMetrics(t *testing.T) {
	m, reg := registered(t, NewIdem)

	store := &faultyStore{Store: memstore.New()}
	started, unblock := make(chan struct{}), make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			http.Error(w, "down", http.StatusInternalServerError)
		case "/slow":
			close(started)
			<-unblock
			fallthrough
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})
	h := idemhttp.Middleware(store, idemhttp.WithObserver(m.Observer("pay")), idemhttp.WithErrorHandler(func(*http.Request, error) {}))(app)
	do := func(path, key, body string) int {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	steps := []struct {
		path, key, body string
		want            int
	}{
		{"/pay", "order-7f3a", "100", http.StatusCreated},              // executed
		{"/pay", "order-7f3a", "100", http.StatusCreated},              // replayed
		{"/pay", "order-7f3a", "999", http.StatusUnprocessableEntity},  // mismatch
		{"/pay", "", "100", http.StatusBadRequest},                     // bad key
		{"/fail", "order-8b1c", "100", http.StatusInternalServerError}, // released
	}
	for i, s := range steps {
		if got := do(s.path, s.key, s.body); got != s.want {
			t.Fatalf("step %d: status %d, want %d", i, got, s.want)
		}
	}

	// A copy that arrives while the first still runs gets 409.
	done := make(chan int)
	go func() { done <- do("/slow", "order-9d2e", "1") }()
	<-started
	if got := do("/slow", "order-9d2e", "1"); got != http.StatusConflict {
		t.Fatalf("concurrent copy: %d, want 409", got)
	}
	close(unblock)
	if got := <-done; got != http.StatusCreated {
		t.Fatalf("slow request: %d", got)
	}

	store.set(errors.New("connection refused"), nil)
	if got := do("/pay", "order-a1", "1"); got != http.StatusServiceUnavailable {
		t.Fatalf("claim failure: %d, want 503", got)
	}
	store.set(nil, errors.New("connection reset"))
	if got := do("/pay", "order-a2", "1"); got != http.StatusCreated {
		t.Fatalf("record failure: %d, want 201 (the handler ran)", got)
	}
	store.set(nil, nil)

	for outcome, want := range map[string]float64{
		"executed": 3, "replayed": 1, "mismatch": 1, "bad_key": 1, "released": 1, "conflict": 1, "store_error": 1, "bad_body": 0,
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues("pay", outcome)); got != want {
			t.Errorf("requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	for op, want := range map[string]float64{"claim": 1, "record": 1, "release": 0, "read": 0} {
		if got := testutil.ToFloat64(m.storeErrs.WithLabelValues("pay", op)); got != want {
			t.Errorf("store_errors_total{operation=%q} = %v, want %v", op, got, want)
		}
	}
	if n, _ := histCount(t, reg, "latchkey_idem_request_duration_seconds", map[string]string{"handler": "pay", "outcome": "executed"}); n != 3 {
		t.Errorf("request_duration_seconds{executed} count = %d, want 3", n)
	}
	exposition := gatherText(t, reg)
	if strings.Contains(exposition, "order-") {
		t.Errorf("a key reached the exposition:\n%s", exposition)
	}
	lint(t, m)
}

// TestIdemDoMetrics drives idem.Do through its outcomes with DoObserver and
// checks each counter, the store errors, and that keys stay out of the
// exposition.
func TestIdemDoMetrics(t *testing.T) {
	m, reg := registered(t, NewIdem)
	store := &faultyStore{Store: memstore.New()}
	obs := idem.WithObserver(m.DoObserver("charge"))
	ctx := context.Background()
	ok := func(context.Context) (string, error) { return "ch_1", nil }
	fail := func(context.Context) (string, error) { return "", errors.New("declined") }

	_, _ = idem.Do(ctx, store, "order-1", ok, obs)                                // executed
	_, _ = idem.Do(ctx, store, "order-1", ok, obs)                                // replayed
	_, _ = idem.Do(ctx, store, "order-1", ok, obs, idem.WithFingerprint("other")) // mismatch
	_, _ = idem.Do(ctx, store, "order-2", fail, obs)                              // released
	_, _ = idem.Do(ctx, store, "", ok, obs)                                       // invalid
	store.set(errors.New("connection refused"), nil)
	_, _ = idem.Do(ctx, store, "order-3", ok, obs) // store_error (claim)
	store.set(nil, errors.New("connection reset"))
	if _, err := idem.Do(ctx, store, "order-4", ok, obs); !errors.Is(err, idem.ErrNotRecorded) { // executed, not recorded
		t.Fatalf("record failure: %v, want ErrNotRecorded", err)
	}
	store.set(nil, nil)

	for outcome, want := range map[string]float64{
		"executed": 2, "replayed": 1, "mismatch": 1, "released": 1, "invalid": 1, "store_error": 1, "conflict": 0,
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues("charge", outcome)); got != want {
			t.Errorf("requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	for op, want := range map[string]float64{"claim": 1, "record": 1} {
		if got := testutil.ToFloat64(m.storeErrs.WithLabelValues("charge", op)); got != want {
			t.Errorf("store_errors_total{operation=%q} = %v, want %v", op, got, want)
		}
	}
	if n, _ := histCount(t, reg, "latchkey_idem_request_duration_seconds", map[string]string{"handler": "charge", "outcome": "executed"}); n != 2 {
		t.Errorf("request_duration_seconds{executed} count = %d, want 2", n)
	}
	if exposition := gatherText(t, reg); strings.Contains(exposition, "order-") {
		t.Errorf("a key reached the exposition:\n%s", exposition)
	}
	lint(t, m)
}
