package state_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/latchkey-go/latchkey/internal/refusaltest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/state"
)

// TestRefusalsReported checks that illegal and repeated moves and
// optimistic updates that lose every race are reported to the state
// Observer with the caller's context (marked, so that tests running at the
// same time do not count), and that applied changes are not.
func TestRefusalsReported(t *testing.T) {
	db := testsvc.OpenDB(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "state.db")+"?_pragma=busy_timeout(10000)")
	const table = "orders"
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, amount BIGINT NOT NULL DEFAULT 0,
		paid_by TEXT, version BIGINT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, table, "o1", "UNPAID", 100)
	ctx, refusals := refusaltest.Watch(t, state.SetObserver, t.Context(), t.Name())

	m := newMachine(t, db, table, orderFlow)
	if _, err := m.Move(ctx, "o1", "PAID", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := m.Move(ctx, "o1", "PAID", nil); r != state.Duplicate || err != nil {
		t.Fatalf("repeated move: %v, %v", r, err)
	}
	if _, err := m.Move(ctx, "o1", "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("PAID -> CANCELLED: %v", err)
	}
	o := newOptimistic(t, db, table, state.WithAttempts(2))
	err := o.Update(ctx, "o1", nil, func() (state.Values, error) {
		_, err := db.Exec(fmt.Sprintf("UPDATE %s SET version = version + 1 WHERE id = 'o1'", table))
		return state.Values{"amount": 1}, err
	})
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("update racing another writer: %v", err)
	}
	want := []state.Refusal{
		{Reason: state.RefusedDuplicate, Table: table, To: "PAID"},
		{Reason: state.RefusedIllegal, Table: table, To: "CANCELLED"},
		{Reason: state.RefusedConflict, Table: table},
	}
	if got := refusals(); !slices.Equal(got, want) {
		t.Fatalf("refusals %v, want %v", got, want)
	}
}
