package redisfence_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/redisfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

type refusalMark struct{}

// TestRefusalsReported checks that each write and fenced read refused with
// fence.ErrStale is reported once to the fence Observer, with the caller's
// context (marked, so that other tests running at the same time do not
// count), and that accepted ones are not.
func TestRefusalsReported(t *testing.T) {
	c := newClient(t)
	g, err := redisfence.New(c)
	if err != nil {
		t.Fatal(err)
	}
	key := testsvc.KeyPrefix(t) + "balance"
	cleanup(t, c, g, key)
	var (
		mu  sync.Mutex
		got []fence.Refusal
	)
	fence.SetObserver(func(ctx context.Context, r fence.Refusal) {
		if ctx.Value(refusalMark{}) == key {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
		}
	})
	t.Cleanup(func() { fence.SetObserver(nil) })
	ctx := context.WithValue(t.Context(), refusalMark{}, key)
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
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("refusals %v, want %v", got, want)
	}
}
