package fence

import (
	"context"
	"errors"
	"testing"
)

// TestCheckReportsRefusal checks that Check tells the Observer of a stale
// token, and only of a stale one.
func TestCheckReportsRefusal(t *testing.T) {
	var got []Refusal
	SetObserver(func(_ context.Context, r Refusal) { got = append(got, r) })
	t.Cleanup(func() { SetObserver(nil) })
	if err := Check(5, Token(5)); err != nil {
		t.Fatal(err)
	}
	if err := Check(5, Token(0)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("token 0: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("refusals reported for accepted or invalid writes: %v", got)
	}
	if err := Check(5, Token(4)); !errors.Is(err, ErrStale) {
		t.Fatalf("stale token: %v", err)
	}
	if len(got) != 1 || got[0] != (Refusal{Guard: "memory", Op: "check"}) {
		t.Fatalf("refusals %v, want one memory check", got)
	}
	SetObserver(nil)
	_ = Check(5, Token(4))
	if len(got) != 1 {
		t.Fatalf("refusal reported after SetObserver(nil)")
	}
}

// BenchmarkCheckStaleUnobserved is the cost of a refused Check with no
// Observer: the atomic load of the hook, beside the error it builds.
func BenchmarkCheckStaleUnobserved(b *testing.B) {
	for b.Loop() {
		_ = Check(5, Token(4))
	}
}
