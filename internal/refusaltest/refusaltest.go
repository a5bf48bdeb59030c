// Package refusaltest makes one refusal of each kind that the fence and
// state packages report to their observers, for the tests of the observers
// that count and trace them, and records the refusals a test's calls are
// reported, for the tests of the packages that report them.
package refusaltest

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	_ "modernc.org/sqlite" // the refusals' database

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/state"
)

// Provoke makes, with ctx, on a SQLite database of its own, a fenced write
// to account with a stale token (sqlfence, op update) and an illegal move of
// order, which is PAID, to CANCELLED (table orders). It fails t unless both
// are refused.
func Provoke(ctx context.Context, t testing.TB, account, order string) {
	t.Helper()
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
	if _, err := db.Exec(`INSERT INTO orders VALUES (?, 'PAID')`, order); err != nil {
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
	if err := g.Upsert(ctx, fence.Token(9), account, sqlfence.Values{"balance": 10}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, fence.Token(8), account, sqlfence.Values{"balance": 0}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale write: %v", err)
	}
	if _, err := m.Move(ctx, order, "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("illegal move: %v", err)
	}
}

type mark struct{}

// Watch makes an observer of refusals of type R, set with set (such as
// fence.SetObserver), the process's observer until the test ends. It
// records the refusals reported with contexts that carry name (so that
// tests running at the same time do not count) and returns ctx carrying
// name and a function that returns the record so far.
func Watch[O ~func(context.Context, R), R any](t testing.TB, set func(O), ctx context.Context, name string) (context.Context, func() []R) {
	var (
		mu  sync.Mutex
		got []R
	)
	set(func(ctx context.Context, r R) {
		if ctx.Value(mark{}) == name {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
		}
	})
	t.Cleanup(func() { set(nil) })
	return context.WithValue(ctx, mark{}, name), func() []R {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
