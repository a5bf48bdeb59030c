package lock

import (
	"context"
	"testing"
)

// BenchmarkAcquireRelease measures the Manager's own cost of one uncontended
// acquire and release on an in-memory backend.
func BenchmarkAcquireRelease(b *testing.B) {
	m, _ := NewManager(newFake())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Acquire(ctx, "k", WithFixedTTL())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseObserved is BenchmarkAcquireRelease with an
// Observer that does nothing, to show what observation itself costs.
func BenchmarkAcquireReleaseObserved(b *testing.B) {
	m, _ := NewManager(newFake())
	m.SetObserver(Observer(func(Event) {}))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Acquire(ctx, "k", WithFixedTTL())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
