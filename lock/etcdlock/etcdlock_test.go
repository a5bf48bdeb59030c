package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

// newClient returns a client of srv closed at the end of the test.
func newClient(t testing.TB, srv *testsvc.EtcdServer, dial ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	return newClientAt(t, []string{srv.Endpoint()}, dial...)
}

// newClientAt returns a client of the etcd at endpoints (host:port: one
// server's, or a cluster's members', tried in the given order) closed at the
// end of the test.
func newClientAt(t testing.TB, endpoints []string, dial ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: dial,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newLocker(t testing.TB, c etcdlock.Client, opts ...etcdlock.Option) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// revoke deletes the holder's key of name (the lowest create revision under
// name/) with a plain client, as an operator would.
func revoke(t testing.TB, c *clientv3.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.Get(ctx, name+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatalf("revoke %q: %v", name, err)
	}
	if len(g.Kvs) == 0 {
		t.Fatalf("revoke %q: no holder", name)
	}
	if _, err := c.Delete(ctx, string(g.Kvs[0].Key)); err != nil {
		t.Fatalf("revoke %q: %v", name, err)
	}
}

func TestConformance(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	admin := newClient(t, srv)
	locktest.Run(t, locktest.Harness{
		// etcd grants a lease of at least 2 s, which Lease.Extend cannot
		// pass, and the suite extends a lease to three TTLs.
		TTL: 600 * time.Millisecond,
		New: func(t *testing.T) lock.Locker {
			return newLocker(t, newClient(t, srv))
		},
		Revoke: func(t *testing.T, key string) { revoke(t, admin, key) },
		Holder: func(t *testing.T, key string) string {
			g, err := admin.Get(t.Context(), key+"/", clientv3.WithFirstCreate()...)
			if err != nil || len(g.Kvs) == 0 {
				t.Fatalf("reading the holder's key of %q: %v (%d keys)", key, err, len(g.Kvs))
			}
			return string(g.Kvs[0].Value)
		},
		Restart: func(t *testing.T) {
			srv.Restart()
		},
	})
}

func TestNewNilClient(t *testing.T) {
	if _, err := etcdlock.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	var c *clientv3.Client
	if _, err := etcdlock.New(c); err == nil {
		t.Fatal("New((*clientv3.Client)(nil)) succeeded")
	}
}

// bareClient has exactly the methods of etcdlock.Client, as a caller's own
// wrapper around some other client may, and so no ActiveConnection: every
// keep-alive goes through its KeepAliveOnce, which it counts.
type bareClient struct {
	c          *clientv3.Client
	keepAlives atomic.Int64
}

var _ etcdlock.Client = (*bareClient)(nil)

func (b *bareClient) Txn(ctx context.Context) clientv3.Txn { return b.c.Txn(ctx) }

func (b *bareClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return b.c.Get(ctx, key, opts...)
}

func (b *bareClient) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	return b.c.Delete(ctx, key, opts...)
}

func (b *bareClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return b.c.Grant(ctx, ttl)
}

func (b *bareClient) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	b.keepAlives.Add(1)
	return b.c.KeepAliveOnce(ctx, id)
}

func (b *bareClient) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	return b.c.Revoke(ctx, id)
}

func (b *bareClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return b.c.Watch(ctx, key, opts...)
}

// TestBareClient runs two Lockers on clients that have only the methods of
// etcdlock.Client: one holds a lock past two renewals while the other waits
// for it, queued and kept alive, and takes it, with a higher token, once it
// is released.
func TestBareClient(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "bare-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second
	ca, cb := &bareClient{c: newClient(t, srv)}, &bareClient{c: newClient(t, srv)}
	a, b := newLocker(t, ca), newLocker(t, cb)

	held, err := a.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *lock.Lease, 1)
	go func() {
		lease, err := b.Acquire(ctx, name, lock.WithTTL(ttl))
		if err != nil {
			t.Error(err)
		}
		next <- lease
	}()
	time.Sleep(ttl) // renewals every TTL/3
	select {
	case <-held.Done():
		t.Fatalf("lease lost while held: %v", held.Err())
	case lease := <-next:
		t.Fatalf("the waiting Locker got the lock while it was held (token %d)", lease.Token())
	default:
	}
	if n := ca.keepAlives.Load(); n == 0 {
		t.Fatal("the holder's lease was renewed without a KeepAliveOnce")
	}
	if n := cb.keepAlives.Load(); n == 0 {
		t.Fatal("the waiter's queued lease was kept alive without a KeepAliveOnce")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-next
	if lease == nil {
		return
	}
	if lease.Token() <= held.Token() {
		t.Fatalf("token %d after %d", lease.Token(), held.Token())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
