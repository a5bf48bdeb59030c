package lock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// waiterWatchFake records which watch each caller took: a backend whose
// server promises releases to one Locker (lock/sqllock on PostgreSQL) must
// learn the owner of every waiting Acquire, and tell observers apart.
type waiterWatchFake struct {
	*fakeBackend
	mu        sync.Mutex
	waiters   []string // owners of WatchReleaseFor calls
	observers int      // WatchRelease calls
}

func (w *waiterWatchFake) WatchRelease(context.Context, string) (<-chan struct{}, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observers++
	return make(chan struct{}), func() {}, nil
}

func (w *waiterWatchFake) WatchReleaseFor(_ context.Context, _, owner string) (<-chan struct{}, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters = append(w.waiters, owner)
	return make(chan struct{}), func() {}, nil
}

// TestWaiterWatcherLearnsTheWaitingOwner checks that a waiting Acquire
// watches through WatchReleaseFor with the owner it attempts as (the
// owner its lease then has), and an observer through WatchRelease.
func TestWaiterWatcherLearnsTheWaitingOwner(t *testing.T) {
	b := &waiterWatchFake{fakeBackend: newFake()}
	m, err := NewManager(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	holder, err := m.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := acquireQueued(ctx, m, "k", WithWait(time.Minute))
	_, stop, _, err := m.WatchHolder(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	l := r.lease
	defer func() { _ = l.Release(context.Background()) }()
	b.fakeBackend.mu.Lock()
	owner := b.fakeBackend.held["k"]
	b.fakeBackend.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) != 1 || owner != b.waiters[0] {
		t.Fatalf("WatchReleaseFor owners %q; the waiter holds as %q", b.waiters, owner)
	}
	if b.observers != 1 {
		t.Fatalf("WatchRelease called %d times, want once (the observer)", b.observers)
	}
}
