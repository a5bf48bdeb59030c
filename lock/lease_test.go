package lock

import (
	"context"
	"testing"
	"time"
)

// TestTimeLeft checks that a fresh lease reports nearly its whole TTL as
// time left, never more than the TTL minus the drift margin, and nothing
// once released.
func TestTimeLeft(t *testing.T) {
	m, _ := NewManager(newFake())
	ctx := context.Background()
	const ttl = 10 * time.Second
	before := time.Now()
	l, err := m.Acquire(ctx, "k", WithTTL(ttl), WithFixedTTL())
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Deadline(); d.Before(before.Add(ttl-DriftMargin(ttl))) || d.After(time.Now().Add(ttl-DriftMargin(ttl))) {
		t.Fatalf("Deadline %v not the acquisition + TTL - drift", d.Sub(before))
	}
	if left := l.TimeLeft(); left > ttl-DriftMargin(ttl) || left < ttl/2 {
		t.Fatalf("TimeLeft = %v right after acquiring a %v lease", left, ttl)
	}
	if l.TTL() != ttl {
		t.Fatalf("TTL = %v, want the requested %v", l.TTL(), ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if left := l.TimeLeft(); left != 0 {
		t.Fatalf("TimeLeft after Release = %v, want 0", left)
	}
}
