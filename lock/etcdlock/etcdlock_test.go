package etcdlock_test

import (
	"context"
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
	return newClientAt(t, srv.Endpoint(), dial...)
}

// newClientAt returns a client of the etcd at endpoint (host:port) closed at
// the end of the test.
func newClientAt(t testing.TB, endpoint string, dial ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
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
