package latchkeyotel_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"go.opentelemetry.io/otel/attribute"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/state"
)

// TestRefusalEvents writes with a stale token and moves an order illegally:
// each refusal is an event on the caller's span and a count, with no key.
func TestRefusalEvents(t *testing.T) {
	r := newRecorded(t)
	r.tel.ObserveRefusals()
	t.Cleanup(func() { fence.SetObserver(nil); state.SetObserver(nil) })
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT, fence_token BIGINT DEFAULT 0);
		CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO orders VALUES ('ord-88', 'PAID')`); err != nil {
		t.Fatal(err)
	}
	g, err := sqlfence.New(db, "accounts")
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.NewMachine(db, "orders", []state.Transition{{From: "UNPAID", To: "CANCELLED"}, {From: "UNPAID", To: "PAID"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "settle")
	if err := g.Upsert(ctx, fence.Token(9), "acct-55", sqlfence.Values{"balance": 10}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, fence.Token(8), "acct-55", sqlfence.Values{"balance": 0}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale write: %v", err)
	}
	if _, err := m.Move(ctx, "ord-88", "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("illegal move: %v", err)
	}
	parent.End()
	events := map[string]int{}
	for _, s := range r.spans.Ended() {
		if s.Name() == "settle" {
			for _, e := range s.Events() {
				events[e.Name]++
			}
		}
	}
	if events["latchkey.fence.refused"] != 1 || events["latchkey.state.refused"] != 1 {
		t.Errorf("events on the caller's span: %v", events)
	}
	if n := r.sum(t, "latchkey.fence.refused", attribute.String("latchkey.fence.guard", "sql"), attribute.String("latchkey.fence.op", "update")); n != 1 {
		t.Errorf("fence.refused = %d", n)
	}
	if n := r.sum(t, "latchkey.state.refused", attribute.String("latchkey.state.table", "orders"), attribute.String("latchkey.state.reason", "illegal")); n != 1 {
		t.Errorf("state.refused = %d", n)
	}
	r.noSecrets(t, "acct-55", "ord-88")
}
