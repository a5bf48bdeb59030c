package lock

import (
	"context"
	"testing"
)

// BenchmarkAcquireRelease measures the Manager's own cost of one uncontended
// acquire and release on an in-memory backend.
func BenchmarkAcquireRelease(b *testing.B) {
	m, _ := NewManager(newFake())
	acquireRelease(b, m)
}

// BenchmarkAcquireReleaseObserved is BenchmarkAcquireRelease with an
// Observer that does nothing, to show what observation itself costs.
func BenchmarkAcquireReleaseObserved(b *testing.B) {
	m, _ := NewManager(newFake())
	m.SetObserver(Observer(func(Event) {}))
	acquireRelease(b, m)
}

// acquireRelease measures one uncontended acquire and release of a key on
// m.
func acquireRelease(b *testing.B, m *Manager) {
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

// BenchmarkObserverUnset is what observation costs a Manager nobody
// observes: the one atomic load per Acquire that finds no Observer (Release
// of an unobserved lease tests a plain pointer). Compare it with
// BenchmarkAcquireRelease: docs/performance.md states the ratio.
func BenchmarkObserverUnset(b *testing.B) {
	m, _ := NewManager(newFake())
	var found int
	for b.Loop() {
		if m.observer() != nil {
			found++
		}
	}
	if found != 0 {
		b.Fatal("an observer was found")
	}
}
