package zklock_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// TestKazooInterop: a kazoo Lock and ours exclude each other on one path.
func TestKazooInterop(t *testing.T) {
	if err := exec.Command(python, "-c", "import kazoo").Run(); err != nil {
		testsvc.Unavailable(t, "kazoo not importable by %s (apt-get install python3-kazoo): %v", python, err)
	}
	srv := startZK(t)
	ours := newLocker(t, srv, zklock.WithPrefix("/locks"), zklock.WithNodeNames(zklock.KazooNames))
	cmd := exec.Command(python, "-c", kazooScript, srv.Endpoint(), "/locks/shared")
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := readLines(out)
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("kazoo said %q, want %q; stderr:\n%s", got, want, readFile(stderr.Name()))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("kazoo did not say %q", want)
		}
	}
	ctx := t.Context()
	expect("held")
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
	io.WriteString(in, "\n") // kazoo releases
	expect("released")
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	io.WriteString(in, "\n") // kazoo tries while we hold
	expect("busy")
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "\n") // kazoo waits and gets it
	expect("got")
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}
