package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/refusaltest"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/state"
)

// TestLockHoldTime checks that a released and a lost lease each add one
// sample to the hold-time histogram, under its end, and that the lint
// passes.
func TestLockHoldTime(t *testing.T) {
	m, reg := registered(t, NewLock)
	l := memlock.New()
	l.SetObserver(m.Observer("mem"))
	ctx := ctxT(t)
	a, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "b", lock.WithTTL(lock.MinTTL), lock.WithFixedTTL())
	if err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	eventually(t, "the loss's sample", func() bool {
		n, _ := histCount(t, reg, "latchkey_lock_hold_seconds", map[string]string{"backend": "mem", "end": "lost"})
		return n == 1
	})
	if n, sum := histCount(t, reg, "latchkey_lock_hold_seconds", map[string]string{"backend": "mem", "end": "released"}); n != 1 || sum <= 0 {
		t.Errorf("released hold samples %d (sum %v), want 1", n, sum)
	}
	lint(t, m)
}

// TestReplayAge replays a payment: the replay's age is one sample of
// latchkey_idem_replay_age_seconds, and the first run none.
func TestReplayAge(t *testing.T) {
	m, reg := registered(t, NewIdem)
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithObserver(m.Observer("pay")))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	send := func() {
		r := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k-1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	send()
	if n, _ := histCount(t, reg, "latchkey_idem_replay_age_seconds", map[string]string{"handler": "pay"}); n != 0 {
		t.Fatalf("%d age samples after the first run", n)
	}
	time.Sleep(2 * time.Millisecond) // records keep milliseconds: let one pass
	send()
	if n, sum := histCount(t, reg, "latchkey_idem_replay_age_seconds", map[string]string{"handler": "pay"}); n != 1 || sum <= 0 {
		t.Fatalf("age samples %d (sum %v) after a replay, want 1", n, sum)
	}
	lint(t, m)
}

// TestRefusalCounts writes with a stale token and moves an order
// illegally: both are counted under bounded labels, never the key.
func TestRefusalCounts(t *testing.T) {
	m, reg := registered(t, NewRefusals)
	m.Observe()
	t.Cleanup(func() { fence.SetObserver(nil); state.SetObserver(nil) })
	refusaltest.Provoke(context.Background(), t, "acct-9", "ord-1")
	if v := testutil.ToFloat64(m.fence.WithLabelValues("sql", "update")); v != 1 {
		t.Errorf("fence refused = %v", v)
	}
	if v := testutil.ToFloat64(m.state.WithLabelValues("orders", "illegal")); v != 1 {
		t.Errorf("state refused = %v", v)
	}
	text := gatherText(t, reg)
	for _, secret := range []string{"acct-9", "ord-1"} {
		if strings.Contains(text, secret) {
			t.Errorf("exposition holds %q", secret)
		}
	}
	lint(t, m)
}
