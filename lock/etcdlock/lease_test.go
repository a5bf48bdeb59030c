package etcdlock_test

import (
	"context"
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
	grants, revokes, txns atomic.Int64
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

func (c *countingClient) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.Client.Txn(ctx)
}

// TestLeaseReuse checks the cost of a lock/unlock pair once a Locker has a
// lease to reuse: two raft writes (the put and the compare-and-delete) and
// one keep-alive, no grant and no revoke; that the keep-alives go over the
// Locker's long-lived streams, not a new stream each; and that Close revokes
// the kept lease.
func TestLeaseReuse(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "reuse-" + testsvc.KeyPrefix(t)
	var sc streamCounter
	cc := &countingClient{Client: newClient(t, srv, grpc.WithChainStreamInterceptor(sc.intercept))}
	l := newLocker(t, cc)

	const pairs = 20
	for i := range pairs + 1 {
		if i == 1 { // the first pair granted the lease
			cc.grants.Store(0)
			cc.revokes.Store(0)
			cc.txns.Store(0)
			sc.streams.Store(0)
			sc.keepAlives.Store(0)
		}
		lease, err := l.Acquire(ctx, name, lock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g, r, x, k := cc.grants.Load(), cc.revokes.Load(), cc.txns.Load(), sc.keepAlives.Load(); g != 0 || r != 0 || x != 2*pairs || k != pairs {
		t.Fatalf("%d pairs on a kept lease sent %d grants, %d revokes, %d transactions, %d keep-alives; want 0, 0, %d, %d",
			pairs, g, r, x, k, 2*pairs, pairs)
	}
	if n := sc.streams.Load(); n > etcdlock.KeepAliveStreams {
		t.Fatalf("%d pairs opened %d keep-alive streams; want at most %d", pairs, n, etcdlock.KeepAliveStreams)
	}

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
