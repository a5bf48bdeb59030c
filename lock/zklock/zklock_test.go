package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// startZK starts a private ZooKeeper whose sessions may last up to 40 s, so
// lockers can take lock.DefaultTTL (30 s) leases, and 1 s sessions still
// expire fast.
func startZK(t *testing.T) *testsvc.ZooKeeperServer {
	return testsvc.StartZooKeeper(t, "maxSessionTimeout=40000")
}

func newLocker(t testing.TB, srv *testsvc.ZooKeeperServer, opts ...zklock.Option) *zklock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := zklock.New(ctx, []string{srv.Endpoint()}, opts...)
	if err != nil {
		t.Fatalf("zklock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// plainConn is an ordinary go-zookeeper client, as an operator would use.
func plainConn(t testing.TB, srv *testsvc.ZooKeeperServer) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{srv.Endpoint()}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// firstContender returns the child with the lowest sequence number (the
// holder), or "" when there is none.
func firstContender(children []string) string {
	first := ""
	for _, ch := range children {
		if len(ch) >= 10 && (first == "" || ch[len(ch)-10:] < first[len(first)-10:]) {
			first = ch
		}
	}
	return first
}

// holderData returns the data of the first contender under the lock's
// znode: the holder label.
func holderData(t *testing.T, c *zk.Conn, dir string) string {
	t.Helper()
	children, _, err := c.Children(dir)
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	first := firstContender(children)
	if first == "" {
		t.Fatalf("%s: no holder", dir)
	}
	data, _, err := c.Get(dir + "/" + first)
	if err != nil {
		t.Fatalf("get %s/%s: %v", dir, first, err)
	}
	return string(data)
}

// revoke deletes the first contender under the lock's znode (the holder).
func revoke(t testing.TB, c *zk.Conn, dir string) {
	t.Helper()
	children, _, err := c.Children(dir)
	if err != nil {
		t.Fatalf("revoke %s: %v", dir, err)
	}
	first := firstContender(children)
	if first == "" {
		t.Fatalf("revoke %s: no holder", dir)
	}
	if err := c.Delete(dir+"/"+first, -1); err != nil {
		t.Fatalf("revoke %s/%s: %v", dir, first, err)
	}
}

func TestConformance(t *testing.T) {
	srv := startZK(t)
	admin := plainConn(t, srv)
	locktest.Run(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			return newLocker(t, srv)
		},
		Revoke:  func(t *testing.T, key string) { revoke(t, admin, zklock.DefaultPrefix+"/"+key) },
		Holder:  func(t *testing.T, key string) string { return holderData(t, admin, zklock.DefaultPrefix+"/"+key) },
		Restart: func(t *testing.T) { srv.Restart() },
		TTL:     time.Second, // a loaded JVM can take 100s of ms to answer
	})
}

func TestConformanceKazooNames(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	srv := startZK(t)
	admin := plainConn(t, srv)
	locktest.Run(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			return newLocker(t, srv, zklock.WithNodeNames(zklock.KazooNames), zklock.WithPrefix("/k"))
		},
		Revoke: func(t *testing.T, key string) { revoke(t, admin, "/k/"+key) },
		Holder: func(t *testing.T, key string) string { return holderData(t, admin, "/k/"+key) },
		TTL:    time.Second,
	})
}

// Our nodes of both naming schemes and foreign ones order by sequence.
func TestMixedNamesExclude(t *testing.T) {
	srv := startZK(t)
	ctx := t.Context()
	a := newLocker(t, srv)
	b := newLocker(t, srv, zklock.WithNodeNames(zklock.KazooNames))
	held, err := a.Acquire(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "mixed", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("kazoo-named try while curator-named holds: %v", err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := b.Acquire(ctx, "mixed", lock.WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter got the lock while it was held")
	default:
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token %d <= %d", next.Token(), held.Token())
	}
	_ = next.Release(ctx)
}

func TestTTLBoundBySession(t *testing.T) {
	srv := testsvc.StartZooKeeper(t) // maxSessionTimeout=10000
	l := newLocker(t, srv, zklock.WithSessionTimeout(30*time.Second))
	if got := l.SessionTimeout(); got != 10*time.Second {
		t.Fatalf("SessionTimeout() = %v, want the server's 10 s cap", got)
	}
	_, err := l.Acquire(t.Context(), "ttl", lock.WithTTL(11*time.Second))
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "session timeout") {
		t.Fatalf("Acquire with TTL > session timeout: %v, want ErrInvalid", err)
	}
	lease, err := l.Acquire(t.Context(), "ttl", lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(t.Context())
}

func TestBadKeysAndOptions(t *testing.T) {
	srv := testsvc.StartZooKeeper(t)
	l := newLocker(t, srv, zklock.WithSessionTimeout(5*time.Second))
	for _, k := range []string{"a//b", "a/", "/a", "..", "a/./b", "a\x00b"} {
		if _, err := l.Acquire(t.Context(), k, lock.WithTTL(time.Second), lock.WithWait(0)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("key %q: %v, want ErrInvalid", k, err)
		}
	}
	ctx := t.Context()
	for _, opts := range [][]zklock.Option{
		{zklock.WithPrefix("nope")},
		{zklock.WithPrefix("/a/")},
		{zklock.WithSessionTimeout(time.Millisecond)},
		{zklock.WithNodeNames(7)},
	} {
		if _, err := zklock.New(ctx, []string{srv.Endpoint()}, opts...); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("New with bad option: %v, want ErrInvalid", err)
		}
	}
	if _, err := zklock.New(ctx, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("New with no servers: %v", err)
	}
	// Nested keys and the root prefix work.
	r := newLocker(t, srv, zklock.WithPrefix(""), zklock.WithSessionTimeout(5*time.Second))
	lease, err := r.Acquire(ctx, "svc/payments/42", lock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A session the server expires closes Done and frees the lock.
func TestSessionExpiryClosesDone(t *testing.T) {
	srv := testsvc.StartZooKeeper(t)
	ctx := t.Context()
	a := newLocker(t, srv, zklock.WithSessionTimeout(time.Second))
	held, err := a.Acquire(ctx, "expire", lock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop() // the session can't be renewed; its node lives on the server
	select {
	case <-held.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Done not closed after the server went away")
	}
	if !errors.Is(held.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err = %v", held.Err())
	}
	srv.Start()
	b := newLocker(t, srv)
	next, err := b.Acquire(ctx, "expire", lock.WithTTL(5*time.Second), lock.WithWait(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token after expiry %d <= %d", next.Token(), held.Token())
	}
	_ = next.Release(ctx)
}
