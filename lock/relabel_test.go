package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// relabelFake is a fakeBackend that can relabel, and notes whether a
// renewal was in flight when it did.
type relabelFake struct {
	*fakeBackend
	relabels       atomic.Int64
	duringRenewal  atomic.Bool
	renewalsInside atomic.Int64 // renewals between a gated start and its end
}

func (f *relabelFake) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	f.renewalsInside.Add(1)
	defer f.renewalsInside.Add(-1)
	return f.fakeBackend.Renew(ctx, key, owner, ttl)
}

func (f *relabelFake) Relabel(_ context.Context, key, owner, newOwner string) error {
	f.calls.Add(1)
	f.relabels.Add(1)
	if f.renewalsInside.Load() > 0 {
		f.duringRenewal.Store(true)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] != owner {
		return ErrNotHeld
	}
	f.held[key] = newOwner
	return nil
}

// TestSetHolderAfterRenewalInFlight: SetHolder waits for the renewal in
// flight, changes the stored owner's label (keeping its id), and the
// renewals after it use the new owner, so the lease lives on.
func TestSetHolderAfterRenewalInFlight(t *testing.T) {
	f := &relabelFake{fakeBackend: newFake()}
	f.gate, f.renewing = make(chan struct{}), make(chan struct{}, 1)
	m, _ := NewManager(f)
	lease, err := m.Acquire(t.Context(), "k", WithTTL(1500*time.Millisecond), WithHolder("first"))
	if err != nil {
		t.Fatal(err)
	}
	<-f.renewing // a renewal is in flight, held back
	set := make(chan error, 1)
	go func() { set <- lease.SetHolder(t.Context(), "second") }()
	time.Sleep(50 * time.Millisecond)
	if n := f.relabels.Load(); n != 0 {
		t.Fatalf("SetHolder relabeled (%d) while a renewal was in flight", n)
	}
	close(f.gate)
	go func() {
		for range f.renewing { // later renewals pass the open gate
		}
	}()
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	if f.duringRenewal.Load() {
		t.Fatal("Relabel ran during a renewal")
	}
	if lease.Holder() != "second" {
		t.Fatalf("Holder() = %q", lease.Holder())
	}
	f.mu.Lock()
	stored := f.held["k"]
	f.mu.Unlock()
	id, label, ok := ParseOwner(stored)
	if !ok || label != "second" || id != lease.owner[:ownerIDLen] {
		t.Fatalf("stored owner %q: want the lease's id with label second", stored)
	}
	renews := f.renews.Load()
	deadline := time.Now().Add(10 * time.Second)
	for f.renews.Load() < renews+2 {
		if time.Now().After(deadline) {
			t.Fatal("no renewals after SetHolder")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-lease.Done():
		t.Fatalf("lease lost after SetHolder: %v", lease.Err())
	default:
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatalf("Release after SetHolder: %v", err)
	}
	if err := lease.SetHolder(t.Context(), "third"); !errors.Is(err, ErrReleased) {
		t.Fatalf("SetHolder after Release: %v, want ErrReleased", err)
	}
}

func TestSetHolderInput(t *testing.T) {
	f := &relabelFake{fakeBackend: newFake()}
	m, _ := NewManager(f)
	lease, err := m.Acquire(t.Context(), "k", WithHolder("same"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(t.Context())
	calls := f.calls.Load()
	for _, label := range []string{string(make([]byte, MaxHolderLen+1)), "a\nb", "\xff"} {
		if err := lease.SetHolder(t.Context(), label); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetHolder(%q): %v, want ErrInvalid", label, err)
		}
	}
	if err := lease.SetHolder(t.Context(), "same"); err != nil {
		t.Fatalf("SetHolder to the label it has: %v", err)
	}
	if n := f.calls.Load() - calls; n != 0 {
		t.Fatalf("%d backend calls for bad or unchanged labels", n)
	}

	plain, _ := NewManager(newFake())
	other, err := plain.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(t.Context())
	if err := other.SetHolder(t.Context(), "x"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SetHolder on a backend without Relabel: %v, want ErrUnsupported", err)
	}
}

// TestSetHolderRefusedLosesLease: a relabel the server refuses (the lock is
// another's) ends the lease.
func TestSetHolderRefusedLosesLease(t *testing.T) {
	f := &relabelFake{fakeBackend: newFake()}
	m, _ := NewManager(f)
	lease, err := m.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.held["k"] = "someone else"
	f.mu.Unlock()
	err = lease.SetHolder(t.Context(), "x")
	if !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("refused SetHolder: %v, want ErrNotHeld and ErrLeaseLost", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done not closed after a refused SetHolder")
	}
}
