package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
)

// countingClient counts the requests a Locker sends through it.
type countingClient struct {
	*clientv3.Client
	grants, revokes, txns, deletes atomic.Int64
}

// streamCounter counts, at the gRPC level, the LeaseKeepAlive streams a
// client opens and the keep-alive requests sent on them (its interceptor is
// installed with newClient).
type streamCounter struct {
	streams, keepAlives atomic.Int64
}

func (sc *streamCounter) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.Lease_LeaseKeepAlive_FullMethodName {
		return s, err
	}
	sc.streams.Add(1)
	return countingStream{ClientStream: s, n: &sc.keepAlives}, nil
}

type countingStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s countingStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

func (c *countingClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	c.grants.Add(1)
	return c.Client.Grant(ctx, ttl)
}

func (c *countingClient) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	c.revokes.Add(1)
	return c.Client.Revoke(ctx, id)
}

func (c *countingClient) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	c.deletes.Add(1)
	return c.Client.Delete(ctx, key, opts...)
}

func (c *countingClient) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.Client.Txn(ctx)
}

// TestLeaseReuse checks the cost of a lock/unlock pair once a Locker has a
// lease to reuse: two raft writes (the put and the delete), no grant and no
// revoke. A renewed lock on a lease confirmed within a third of its TTL
// needs no keep-alive; one on an older lease, and every fixed-TTL lock, has
// one, over the Locker's long-lived streams, not a new stream each. Close
// revokes the kept lease.
func TestLeaseReuse(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "reuse-" + testsvc.KeyPrefix(t)
	var sc streamCounter
	cc := &countingClient{Client: newClient(t, srv, grpc.WithChainStreamInterceptor(sc.intercept))}
	l := newLocker(t, cc)
	const ttl = 3 * time.Second

	pair := func(opts ...lock.Option) {
		t.Helper()
		lease, err := l.Acquire(ctx, name, append(opts, lock.WithTTL(ttl))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var since time.Time
	reset := func() {
		cc.grants.Store(0)
		cc.revokes.Store(0)
		cc.txns.Store(0)
		cc.deletes.Store(0)
		sc.keepAlives.Store(0)
		since = time.Now()
	}
	// The kept lease is confirmed again once a third of its TTL has passed
	// since the last confirmation, so a loaded machine whose pairs take
	// longer than that sees one more keep-alive per third of the TTL: more
	// than that would be a keep-alive per pair.
	check := func(what string, pairs int, keepAlives int64) {
		t.Helper()
		g, r, x, d, k := cc.grants.Load(), cc.revokes.Load(), cc.txns.Load(), cc.deletes.Load(), sc.keepAlives.Load()
		slack := int64(time.Since(since) / (ttl / 3))
		if g != 0 || r != 0 || x != int64(pairs) || d != int64(pairs) || k < keepAlives || k > keepAlives+slack {
			t.Fatalf("%d %s sent %d grants, %d revokes, %d transactions, %d deletes, %d keep-alives; want 0, 0, %d, %d, %d (+%d for the time taken)",
				pairs, what, g, r, x, d, k, pairs, pairs, keepAlives, slack)
		}
	}

	pair() // grants the lease
	const pairs = 20
	reset()
	for range pairs {
		pair()
	}
	check("renewed pairs on a fresh kept lease", pairs, 0)

	reset()
	for range pairs {
		pair(lock.WithFixedTTL())
	}
	check("fixed-TTL pairs on a kept lease", pairs, pairs)
	if n := sc.streams.Load(); n > etcdlock.KeepAliveStreams {
		t.Fatalf("%d pairs opened %d keep-alive streams; want at most %d", pairs, n, etcdlock.KeepAliveStreams)
	}

	time.Sleep(ttl/3 + 100*time.Millisecond) // the lease was last confirmed by the last pair
	reset()
	pair()
	check("renewed pair on a lease confirmed over a third of the TTL ago", 1, 1)

	before := leaseCount(t, cc.Client)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after := leaseCount(t, cc.Client); after != before-1 {
		t.Fatalf("leases on the server: %d before Close, %d after; want one revoked", before, after)
	}
}

// TestReusedLeaseOutlivesTTL takes a lock on a lease kept idle for a second,
// then cuts the holder off from etcd (its client closed, as if the process
// had died): the lease's expiry, not a release, frees the name. Another
// Locker must not get it before the lock's full TTL, counted from the
// acquisition, has passed: the kept lease was refreshed when it was reused.
// Without the refresh it would expire a second early.
func TestReusedLeaseOutlivesTTL(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "outlives-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second
	c := newClient(t, srv)
	l := newLocker(t, c)
	keepIdleLease(ctx, t, l, name, ttl)

	start := time.Now()
	if _, err := l.Acquire(ctx, name, lock.WithTTL(ttl), lock.WithFixedTTL()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	heldForTTL(ctx, t, srv, name, start, ttl)
}

// keepIdleLease takes and releases name on l, then waits a second: l now
// keeps a lease with no key whose server-side expiry is a second short of a
// full TTL, which the next acquisition must refresh.
func keepIdleLease(ctx context.Context, t *testing.T, l *etcdlock.Locker, name string, ttl time.Duration) {
	t.Helper()
	warm, err := l.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
}

// heldForTTL waits for name on a fresh Locker and fails if it got the lock
// before ttl had passed since start: the dead holder's lease, refreshed when
// it was reused, must keep the name for its full TTL.
func heldForTTL(ctx context.Context, t *testing.T, srv *testsvc.EtcdServer, name string, start time.Time, ttl time.Duration) {
	t.Helper()
	next, err := newLocker(t, newClient(t, srv)).Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < ttl {
		t.Fatalf("another Locker got the lock %v after a %v lease on a reused lease began", got, ttl)
	}
	_ = next.Release(ctx)
}

func leaseCount(t *testing.T, c *clientv3.Client) int {
	t.Helper()
	r, err := c.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(r.Leases)
}

// TestReusedFreshLeaseGivenUpFirst takes a renewed lock on a kept lease
// confirmed 0.8 s earlier, which the Locker uses without a keep-alive, and
// then cuts the holder off from etcd (its client closed). The holder must be
// told (Done) before another Locker gets the name: its lease was certain
// only until the kept lease's expiry, not for a full TTL from the
// acquisition, which it would have been told 0.8 s too late.
func TestReusedFreshLeaseGivenUpFirst(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "fresh-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second
	var sc streamCounter
	c := newClient(t, srv, grpc.WithChainStreamInterceptor(sc.intercept))
	l := newLocker(t, c)
	warm, err := l.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)

	held, err := l.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if n := sc.keepAlives.Load(); n != 0 {
		t.Fatalf("the lock on a lease confirmed 0.8 s ago sent %d keep-alives; want none", n)
	}
	_ = c.Close()
	done := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		done <- time.Now()
	}()

	next, err := newLocker(t, newClient(t, srv)).Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	defer func() { _ = next.Release(ctx) }()
	select {
	case told := <-done:
		if told.After(got) {
			t.Fatalf("another Locker got the lock %v before the cut-off holder was told", told.Sub(got))
		}
	default:
		t.Fatal("another Locker got the lock while the cut-off holder's Done was still open")
	}
	if !errors.Is(held.Err(), lock.ErrLeaseLost) {
		t.Fatalf("holder's Err = %v, want ErrLeaseLost", held.Err())
	}
}
