package etcdlock_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestServerPausedMidLease freezes etcd (SIGSTOP) while a lease is held and a
// second Acquire waits. The holder's renewals go unanswered, so its Done must
// close at its local deadline, before the waiter gets the lock once etcd
// resumes and expires the holder's etcd lease.
func TestServerPausedMidLease(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "paused-" + testsvc.KeyPrefix(t)
	const ttl = time.Second

	a, b := newLocker(t, newClient(t, srv)), newLocker(t, newClient(t, srv))
	held, err := a.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *lock.Lease
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		lease, err := b.Acquire(ctx, name, lock.WithTTL(ttl))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- result{lease, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is queued

	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Signal(syscall.SIGCONT)
		}
	}()
	select {
	case <-held.Done():
	case <-time.After(3 * ttl):
		t.Fatalf("Done not closed %v after etcd froze (TTL %v)", 3*ttl, ttl)
	}
	doneAt := time.Now()
	if !errors.Is(held.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", held.Err())
	}
	if d := doneAt.Sub(paused); d > ttl {
		t.Errorf("Done closed %v after the pause, later than the TTL %v", d, ttl)
	}
	// Stay frozen past the server-side lease (TTL rounded up, at least 2 s),
	// so the holder's lease expires the moment etcd resumes.
	time.Sleep(2500 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("waiter acquired at %v while etcd was frozen", r.at.Sub(paused))
	default:
	}
	if err := srv.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	resumedAt := time.Now()

	r := <-got
	if r.lease == nil {
		t.FailNow()
	}
	if !doneAt.Before(r.at) {
		t.Fatalf("waiter got the lock at %v, before the holder's Done at %v", r.at.Sub(paused), doneAt.Sub(paused))
	}
	if r.lease.Token() <= held.Token() {
		t.Fatalf("successor token %d <= predecessor's %d", r.lease.Token(), held.Token())
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale Release = %v, want ErrNotHeld", err)
	}
	// The successor's attempt was sent while etcd was frozen, and the
	// Manager counts its lease from then, so it may already be past its local
	// deadline and report the loss at once: conservative, never two holders.
	t.Logf("holder Done %v after the pause; successor in at %v (etcd resumed at %v)",
		doneAt.Sub(paused), r.at.Sub(paused), resumedAt.Sub(paused))
	if err := r.lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		t.Fatal(err)
	}
}
