package sqlfence_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/refusaltest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestRefusalsReported checks that each guarded call refused with
// fence.ErrStale is reported once to the fence Observer, with the caller's
// context, and that accepted calls are not.
func TestRefusalsReported(t *testing.T) {
	db := testsvc.OpenDB(t, "sqlite", sqliteDSN(filepath.Join(t.TempDir(), "fence.db")))
	table := inventoryTable(t, db)
	g := guardOn(t, db, table)
	ctx, refusals := refusaltest.Watch(t, fence.SetObserver, t.Context(), t.Name())
	if err := g.Upsert(ctx, fence.Token(7), "a", sqlfence.Values{"qty": 1}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, fence.Token(7), "a", sqlfence.Values{"qty": 2}); err != nil {
		t.Fatal(err)
	}
	if got := refusals(); len(got) != 0 {
		t.Fatalf("accepted writes reported as refused: %v", got)
	}
	var qty int64
	calls := []struct {
		op   string
		call func() error
	}{
		{"update", func() error { return g.Update(ctx, fence.Token(6), "a", sqlfence.Values{"qty": 3}) }},
		{"upsert", func() error { return g.Upsert(ctx, fence.Token(6), "a", sqlfence.Values{"qty": 3}) }},
		{"claim", func() error { return g.Claim(ctx, fence.Token(6), "a") }},
		{"read", func() error { return g.Read(ctx, fence.Token(6), "a", sqlfence.Into{"qty": &qty}) }},
	}
	var want []fence.Refusal
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%s with a stale token: %v", c.op, err)
		}
		want = append(want, fence.Refusal{Guard: "sql", Op: c.op})
	}
	if got := refusals(); !slices.Equal(got, want) {
		t.Fatalf("refusals %v, want %v", got, want)
	}
}
