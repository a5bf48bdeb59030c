package etcdlock_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// splitClient sends transactions and reads straight to etcd, and everything
// about leases (grants, the keep-alive streams) through its embedded client,
// connected through a proxy: the proxy's faults hit only lease traffic.
type splitClient struct {
	*clientv3.Client
	direct *clientv3.Client
}

func (s splitClient) Txn(ctx context.Context) clientv3.Txn { return s.direct.Txn(ctx) }

func (s splitClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return s.direct.Get(ctx, key, opts...)
}

// TestBrokenKeepAliveNotConfirmed reuses a lease kept idle for a second, so
// the acquisition must refresh it, and loses that refresh: the keep-alive is
// sent into a blackhole, then the connection it went on is cut, so its stream
// breaks with the request unanswered and the server never renewed the lease.
// Acquire must not return meanwhile, and must not take the broken request as
// confirmed: it sends the keep-alive again once the link is back. Then the
// holder's clients close, as if the process had died, and another Locker must
// not get the lock before the lock's full TTL, counted from the acquisition,
// has passed. Taking the lost keep-alive as confirmed would hold the lock on
// a lease that expires on the server a second early.
func TestBrokenKeepAliveNotConfirmed(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "broken-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second
	p := testsvc.NewProxy(t, srv.Endpoint())
	via, direct := newClientAt(t, []string{p.Addr()}), newClient(t, srv)
	l := newLocker(t, splitClient{Client: via, direct: direct})
	keepIdleLease(ctx, t, l, name, ttl)

	p.Blackhole(true)
	type result struct {
		lease *lock.Lease
		err   error
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		lease, err := l.Acquire(ctx, name, lock.WithTTL(ttl), lock.WithFixedTTL())
		got <- result{lease, err}
	}()
	time.Sleep(300 * time.Millisecond) // the key is put; the keep-alive is lost
	select {
	case r := <-got:
		t.Fatalf("Acquire returned (err %v) while its lease's keep-alive was unanswered", r.err)
	default:
	}
	p.Cut()
	p.Blackhole(false)
	p.Restore()
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after the link came back: %v", r.err)
	}
	_ = via.Close()
	_ = direct.Close()
	heldForTTL(ctx, t, srv, name, start, ttl)
}
