package zklock_test

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

const python = "/usr/bin/python3" // Debian's, which sees python3-kazoo

// kazooScript holds a kazoo Lock, stepping on each line read from stdin.
const kazooScript = `
import sys, logging
logging.basicConfig(level=logging.ERROR)
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
lk = zk.Lock(sys.argv[2], identifier="kazoo")
lk.acquire(); print("held", flush=True)
sys.stdin.readline(); lk.release(); print("released", flush=True)
from kazoo.exceptions import LockTimeout
sys.stdin.readline()
try:
    lk.acquire(timeout=1.5); print("got", flush=True)
except LockTimeout:
    print("busy", flush=True)
sys.stdin.readline(); print("got" if lk.acquire(timeout=10) else "busy", flush=True)
lk.release(); zk.stop(); zk.close()
`

// needKazoo fails the test in CI, and skips it elsewhere, unless python
// can import kazoo.
func needKazoo(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import kazoo").Run(); err != nil {
		testsvc.Unavailable(t, "kazoo not importable by %s (apt-get install python3-kazoo): %v", python, err)
	}
}

// startKazoo runs a kazoo script with args; it is killed in t.Cleanup.
func startKazoo(t *testing.T, script string, args ...string) *child {
	t.Helper()
	needKazoo(t)
	return startChild(t, "kazoo", exec.Command(python, append([]string{"-c", script}, args...)...), 0)
}

// TestKazooInterop: a kazoo Lock and ours exclude each other on one path.
func TestKazooInterop(t *testing.T) {
	srv := startZK(t)
	ours := newLocker(t, srv, zklock.WithPrefix("/locks"), zklock.WithNodeNames(zklock.KazooNames))
	kazoo := startKazoo(t, kazooScript, srv.Endpoint(), "/locks/shared")
	ctx := t.Context()
	kazoo.expect("held")
	if _, err := ours.Acquire(ctx, "shared", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("took the lock kazoo holds: %v", err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := ours.Acquire(ctx, "shared", lock.WithWait(15*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("our waiter got the lock while kazoo held it")
	default:
	}
	kazoo.send("") // kazoo releases
	kazoo.expect("released")
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	kazoo.send("") // kazoo tries while we hold
	kazoo.expect("busy")
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	kazoo.send("") // kazoo waits and gets it
	kazoo.expect("got")
}
