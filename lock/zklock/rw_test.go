package zklock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func newRW(t testing.TB, srv *testsvc.ZooKeeperServer, opts ...zklock.Option) *rwlock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := zklock.NewRW(ctx, []string{srv.Endpoint()}, opts...)
	if err != nil {
		t.Fatalf("zklock.NewRW: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestRWConformance(t *testing.T) {
	srv := startZK(t)
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(t *testing.T) *rwlock.Locker { return newRW(t, srv) },
	})
}

func TestMain(m *testing.M) {
	rwlocktest.Child(rwTarget)
	os.Exit(m.Run())
}

// rwSession is the session timeout of the process checks: a killed or
// stopped holder's nodes go when its session expires, so it must be short,
// and at least their TTL.
const rwSession = 2 * time.Second

// rwTarget opens a read-write Locker on the server at config.
var rwTarget = rwlocktest.Target{
	Name: "zk",
	Open: func(ctx context.Context, config string) (*rwlock.Locker, error) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return zklock.NewRW(ctx, []string{config}, zklock.WithSessionTimeout(rwSession))
	},
}

func TestRWProcesses(t *testing.T) {
	rwlocktest.RunProcesses(t, rwTarget, startZK(t).Endpoint())
}

// kazooRWScript takes a kazoo ReadLock or WriteLock (argv[3]) on a path and
// steps on each line read from stdin: acquire, release, then a try with a
// 1 s timeout.
const kazooRWScript = `
import sys, logging
logging.basicConfig(level=logging.ERROR)
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
mk = zk.ReadLock if sys.argv[3] == "read" else zk.WriteLock
lk = mk(sys.argv[2], identifier="kazoo-" + sys.argv[3])
lk.acquire(); print("held", flush=True)
sys.stdin.readline(); lk.release(); print("released", flush=True)
from kazoo.exceptions import LockTimeout
sys.stdin.readline()
try:
    lk.acquire(timeout=1); print("got", flush=True)
except LockTimeout:
    print("busy", flush=True)
sys.stdin.readline(); zk.stop(); zk.close()
`

// TestRWKazooInterop: kazoo's ReadLock and WriteLock and ours share and
// exclude on one path as readers and writers should.
func TestRWKazooInterop(t *testing.T) {
	srv := startZK(t)
	ours := newRW(t, srv, zklock.WithPrefix("/locks"))
	ctx := t.Context()
	kazoo := func(mode string) *child {
		k := startKazoo(t, kazooRWScript, srv.Endpoint(), "/locks/prices", mode)
		k.name = "kazoo " + mode
		return k
	}

	// kazoo's writer keeps our reader out.
	kw := kazoo("write")
	kw.expect("held")
	if _, err := ours.RLock(ctx, "prices", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("our RLock under kazoo's WriteLock = %v, want ErrNotAcquired", err)
	}
	info, err := ours.Inspect(ctx, "prices")
	if err != nil || info.Writer == nil || info.Writer.Label != "kazoo-write" {
		t.Fatalf("Inspect under kazoo's WriteLock = %+v, %v", info, err)
	}
	kw.send("")
	kw.expect("released")
	// Our reader keeps kazoo's writer out; kazoo's reader shares with it.
	r, err := ours.RLock(ctx, "prices", lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	kw.send("")
	kw.expect("busy")
	kr := kazoo("read")
	kr.expect("held")
	if _, err := ours.Lock(ctx, "prices", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("our Lock beside two readers = %v, want ErrNotAcquired", err)
	}
	kr.send("")
	kr.expect("released")
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Our writer keeps kazoo's reader out.
	w, err := ours.Lock(ctx, "prices", lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	kr.send("")
	kr.expect("busy")
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	kr.send("")
}
