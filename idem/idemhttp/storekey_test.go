package idemhttp_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// An operator finds a customer's payment by the parts its request had, on
// every store, and forgets it: a done payment's next request runs, a running
// one is refused unless forced.
func TestStoreKeyFindsTheMiddlewaresRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, _ string, store idem.Store) {
		p := newPayments(t, store)
		p.forgetDone()
		p.forgetRunning()
	})
}

// payments is the middleware on a store in front of a payment handler that
// holds the requests marked X-Hold until release is closed.
type payments struct {
	t         *testing.T
	h         http.Handler
	in        idem.Inspector
	runs      atomic.Int32
	release   chan struct{}
	principal string // the scope of the customer's Authorization header
	// The forced Forget takes the claim from the running payment, whose
	// outcome then cannot be recorded: the middleware reports it here.
	notRecorded chan error
}

func newPayments(t *testing.T, store idem.Store) *payments {
	sum := sha256.Sum256([]byte("Bearer sk_live_customer"))
	p := &payments{
		t:           t,
		in:          store.(idem.Inspector),
		release:     make(chan struct{}),
		principal:   "authz-sha256:" + hex.EncodeToString(sum[:]),
		notRecorded: make(chan error, 1),
	}
	onError := idemhttp.WithErrorHandler(func(_ *http.Request, err error) { p.notRecorded <- err })
	p.h = idemhttp.Middleware(store, onError)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			<-p.release
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charge":"ch_` + string(rune('0'+p.runs.Add(1))) + `"}`))
	}))
	return p
}

// pay sends the customer's payment request with the idempotency key, held
// in the handler if hold.
func (p *payments) pay(key string, hold bool) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Authorization", "Bearer sk_live_customer")
	req.Header.Set("Idempotency-Key", key)
	if hold {
		req.Header.Set("X-Hold", "1")
	}
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, req)
	return w
}

// forgetDone finds a done payment by its request's parts, and not by
// another principal's, and forgets it: the next request runs.
func (p *payments) forgetDone() {
	t, ctx := p.t, p.t.Context()
	if w := p.pay("k-done", false); w.Code != http.StatusCreated {
		t.Fatalf("first payment: %d %s", w.Code, w.Body)
	}
	key, err := idemhttp.StoreKey(p.principal, http.MethodPost, "/payments", "k-done")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := p.in.Lookup(ctx, key)
	if err != nil || rec.State != idem.Done {
		t.Fatalf("Lookup by the request's parts = %+v, %v; want the done payment", rec, err)
	}
	resp, err := idemhttp.ReadRecorded(rec.Result)
	if err != nil || resp.Status != http.StatusCreated || string(resp.Body) != `{"charge":"ch_1"}` ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("recorded response = %+v, %v", resp, err)
	}
	other, _ := idemhttp.StoreKey("", http.MethodPost, "/payments", "k-done")
	if _, err := p.in.Lookup(ctx, other); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("another principal's key found a record: %v", err)
	}
	if err := p.in.Forget(ctx, key, false); err != nil {
		t.Fatal(err)
	}
	if w := p.pay("k-done", false); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" ||
		!strings.Contains(w.Body.String(), "ch_2") {
		t.Fatalf("after Forget the retry was not run: %d %q", w.Code, w.Body)
	}
}

// forgetRunning forgets a running payment: refused unless forced, and
// forced, the next copy runs and the running one's record fails.
func (p *payments) forgetRunning() {
	t, ctx := p.t, p.t.Context()
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- p.pay("k-running", true) }()
	running, _ := idemhttp.StoreKey(p.principal, http.MethodPost, "/payments", "k-running")
	for {
		if r, err := p.in.Lookup(ctx, running); err == nil && r.State == idem.InProgress {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.in.Forget(ctx, running, false); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("unforced Forget of a running payment = %v, want ErrInProgress", err)
	}
	if w := p.pay("k-running", false); w.Code != http.StatusConflict {
		t.Fatalf("a copy while the first runs: %d, want 409", w.Code)
	}
	if err := p.in.Forget(ctx, running, true); err != nil {
		t.Fatalf("forced Forget: %v", err)
	}
	if w := p.pay("k-running", false); w.Code != http.StatusCreated {
		t.Fatalf("a copy after the forced Forget: %d %s, want it run", w.Code, w.Body)
	}
	close(p.release)
	if w := <-done; w.Code != http.StatusCreated {
		t.Fatalf("the running payment answered %d", w.Code)
	}
	if err := <-p.notRecorded; !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("the running payment's record failed with %v, want ErrClaimLost", err)
	}
}

func TestStoreKeyRefusesWhatTheMiddlewareRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, key string
		want        error
	}{
		{"POST", "", idemhttp.ErrKeyMissing},
		{"POST", strings.Repeat("k", idemhttp.MaxKeyLen+1), idemhttp.ErrKeyTooLong},
		{"POST", "k\n1", idemhttp.ErrKeyMalformed},
		{"PO ST", "k-1", idem.ErrInvalid},
		{"", "k-1", idem.ErrInvalid},
	} {
		if k, err := idemhttp.StoreKey("p", tc.method, "/payments", tc.key); !errors.Is(err, tc.want) {
			t.Errorf("StoreKey(%q, %q) = %q, %v; want %v", tc.method, tc.key, k, err, tc.want)
		}
	}
	// Parts that would alias if joined naively stay apart.
	a, _ := idemhttp.StoreKey("a b", "POST", "/x", "k")
	b, _ := idemhttp.StoreKey("a", "POST", "b /x", "k")
	if a == b {
		t.Fatal("two scopes give one key")
	}
}

func ExampleStoreKey() {
	key, err := idemhttp.StoreKey("header:acct-42", "POST", "/payments", "k-1")
	fmt.Println(key, err)
	// Output:
	// 4:http 65:p1fb77f9a48a54b1b6e1187f969883b8cdd64520010dbf6dcfac4b4b48f36f1a6 4:POST 10:=/payments 3:k-1 <nil>
}
