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

// TestClusterLeaderKilled holds a lock on a 3-member cluster, kills the
// leader (SIGKILL), and has a second Locker try to take the lock, once per
// round, for a while after. The invariant: the lease survives or its Done
// fires, never two holders. Whenever the second Locker gets the lock, the
// first lease's Done must already be closed, and the successor's token must
// be higher. The first holder's Release then follows the contract: nil while
// still held, ErrNotHeld once lost.
func TestClusterLeaderKilled(t *testing.T) {
	c := testsvc.StartEtcdCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	name := "cluster-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second

	eps := c.Endpoints()
	rev := []string{eps[2], eps[1], eps[0]}
	a, b := newLocker(t, newClientAt(t, eps)), newLocker(t, newClientAt(t, rev))

	held, err := a.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, name, lock.WithTTL(ttl), lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Acquire before the kill = %v, want ErrNotAcquired", err)
	}
	killedAt := killLeader(ctx, t, c)

	successor := trySuccession(ctx, t, b, name, ttl, held, killedAt)
	releaseAfterKill(ctx, t, held, successor)

	// Whatever happened, the lock is still usable and tokens still grow.
	if successor == nil {
		successor, err = b.Acquire(ctx, name, lock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire after the holder's Release: %v", err)
		}
		if successor.Token() <= held.Token() {
			t.Fatalf("successor token %d <= predecessor's %d", successor.Token(), held.Token())
		}
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatalf("successor Release: %v", err)
	}
}

// killLeader kills c's leader (SIGKILL) and returns when.
func killLeader(ctx context.Context, t *testing.T, c *testsvc.EtcdCluster) time.Time {
	t.Helper()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := c.Members[leader]
	if err := killed.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed leader %s (%s)", killed.Name, killed.Endpoint())
	return killedAt
}

// trySuccession has b try name (for a lease of ttl) once every 100 ms for
// three TTLs after killedAt: long enough for a new election, for the
// holder's renewals to go through or fail, and for the server to expire the
// holder's etcd lease if it was lost. It returns the lease b got, or nil.
// Whenever b gets the lock, held's Done must already be closed and b's
// token must be higher.
func trySuccession(ctx context.Context, t *testing.T, b lock.Locker, name string, ttl time.Duration, held *lock.Lease, killedAt time.Time) *lock.Lease {
	t.Helper()
	tries, failures := 0, 0
	defer func() { t.Logf("%d tries, %d failed with errors other than ErrNotAcquired", tries, failures) }()
	for ; time.Since(killedAt) < 3*ttl; time.Sleep(100 * time.Millisecond) {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		lease, err := b.Acquire(actx, name, lock.WithTTL(ttl), lock.WithWait(0))
		acancel()
		tries++
		switch {
		case err == nil:
			if !closed(held.Done()) {
				t.Fatalf("second Locker acquired %v after the kill while the first lease's Done was open: two holders", time.Since(killedAt))
			}
			if lease.Token() <= held.Token() {
				t.Fatalf("successor token %d <= predecessor's %d", lease.Token(), held.Token())
			}
			t.Logf("successor in at %v after the kill (holder: %v)", time.Since(killedAt), held.Err())
			return lease
		case errors.Is(err, lock.ErrNotAcquired):
		default:
			// The cluster is electing or the client is failing over.
			failures++
		}
	}
	return nil
}

// releaseAfterKill releases held and checks that Release follows the
// contract: nil while still held, ErrNotHeld once lost (and it was lost if
// its Done had closed or a successor got the lock).
func releaseAfterKill(ctx context.Context, t *testing.T, held, successor *lock.Lease) {
	t.Helper()
	lostBefore := closed(held.Done())
	rerr := held.Release(ctx)
	switch {
	case rerr == nil:
		if lostBefore || successor != nil {
			t.Fatalf("Release = nil although the lease was lost (successor: %v)", successor != nil)
		}
		t.Log("the lease survived the leader's death")
	case errors.Is(rerr, lock.ErrNotHeld):
		// Lost before Release, perhaps just now.
		if !errors.Is(held.Err(), lock.ErrLeaseLost) {
			t.Fatalf("Release = %v but Err = %v, want ErrLeaseLost", rerr, held.Err())
		}
		t.Logf("the lease was lost: %v", held.Err())
	default:
		t.Fatalf("Release = %v, want nil or ErrNotHeld", rerr)
	}
}

// closed reports whether ch is closed (or has a value ready).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
