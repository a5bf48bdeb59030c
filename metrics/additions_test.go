package metrics

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/state"
)

// TestLockHoldTime checks that a released and a lost lease each add one
// sample to the hold-time histogram, under its end, and that the lint
// passes.
func TestLockHoldTime(t *testing.T) {
	m, reg := newLockMetrics(t)
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
	m, err := NewIdem()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
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
	m, err := NewRefusals()
	if err != nil {
		t.Fatal(err)
	}
	m.Observe()
	t.Cleanup(func() { fence.SetObserver(nil); state.SetObserver(nil) })
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT, fence_token BIGINT DEFAULT 0);
		CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL); INSERT INTO orders VALUES ('ord-1', 'PAID')`); err != nil {
		t.Fatal(err)
	}
	g, _ := sqlfence.New(db, "accounts")
	ctx := context.Background()
	if err := g.Upsert(ctx, fence.Token(5), "acct-9", sqlfence.Values{"balance": 1}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, fence.Token(4), "acct-9", sqlfence.Values{"balance": 0}); !errors.Is(err, fence.ErrStale) {
		t.Fatal(err)
	}
	mach, _ := state.NewMachine(db, "orders", []state.Transition{{From: "UNPAID", To: "CANCELLED"}})
	if _, err := mach.Move(ctx, "ord-1", "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.fence.WithLabelValues("sql", "update")); v != 1 {
		t.Errorf("fence refused = %v", v)
	}
	if v := testutil.ToFloat64(m.state.WithLabelValues("orders", "illegal")); v != 1 {
		t.Errorf("state refused = %v", v)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	text := gatherText(t, reg)
	for _, secret := range []string{"acct-9", "ord-1"} {
		if strings.Contains(text, secret) {
			t.Errorf("exposition holds %q", secret)
		}
	}
	lint(t, m)
}
