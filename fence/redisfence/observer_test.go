package redisfence_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/refusaltest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestRefusalsReported checks that each write and fenced read refused with
// fence.ErrStale is reported once to the fence Observer, with the caller's
// context (marked, so that other tests running at the same time do not
// count), and that accepted ones are not.
func TestRefusalsReported(t *testing.T) {
	key := testsvc.KeyPrefix(t) + "balance"
	_, g := guarded(t, key)
	ctx, refusals := refusaltest.Watch(t, fence.SetObserver, t.Context(), key)
	if err := g.Set(ctx, fence.Token(7), key, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Read(ctx, fence.Token(7), key); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		op   string
		call func() error
	}{
		{"set", func() error { return g.Set(ctx, fence.Token(6), key, "b", 0) }},
		{"del", func() error { return g.Del(ctx, fence.Token(6), key) }},
		{"read", func() error { _, err := g.Read(ctx, fence.Token(6), key); return err }},
	}
	var want []fence.Refusal
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%s with a stale token: %v", c.op, err)
		}
		want = append(want, fence.Refusal{Guard: "redis", Op: c.op})
	}
	if got := refusals(); !slices.Equal(got, want) {
		t.Fatalf("refusals %v, want %v", got, want)
	}
}
