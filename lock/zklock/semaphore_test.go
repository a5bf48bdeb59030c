package zklock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
	"github.com/latchkey-go/latchkey/semaphore"
	"github.com/latchkey-go/latchkey/semaphore/semaphoretest"
)

func newSemaphores(t testing.TB, endpoint string, opts ...zklock.Option) *semaphore.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zklock.NewSemaphores(ctx, []string{endpoint}, opts...)
	if err != nil {
		t.Fatalf("NewSemaphores: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSemaphoreConformance runs the semaphore suite on a private
// ZooKeeper. Each Client talks through a proxy of its own, which Cut turns
// into a black hole: the session then expires after its 4 s timeout, as a
// crashed holder's does.
func TestSemaphoreConformance(t *testing.T) {
	srv := startZK(t)
	admin := plainConn(t, srv)
	var proxies sync.Map // *semaphore.Client -> *testsvc.Proxy
	semaphoretest.Run(t, semaphoretest.Harness{
		TTL:    2 * time.Second, // a loaded JVM can take 100s of ms to answer
		MaxTTL: 4 * time.Second, // the session timeout
		New: func(t *testing.T) *semaphore.Client {
			p := testsvc.NewProxy(t, srv.Endpoint())
			c := newSemaphores(t, p.Addr(), zklock.WithSessionTimeout(4*time.Second))
			proxies.Store(c, p)
			return c
		},
		Revoke: func(t *testing.T, name string) {
			dir := zklock.DefaultPrefix + "/" + name
			kids, _, err := admin.Children(dir)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				t.Fatal(err)
			}
			for _, k := range kids {
				if err := admin.Delete(dir+"/"+k, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					t.Fatal(err)
				}
			}
		},
		Cut: func(t *testing.T, c *semaphore.Client) {
			p, _ := proxies.Load(c)
			p.(*testsvc.Proxy).Blackhole(true)
		},
	})
}

// kazooSemaphoreScript holds one lease of a kazoo Semaphore, then steps on
// each line read from stdin.
const kazooSemaphoreScript = `
import sys, logging
logging.basicConfig(level=logging.ERROR)
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
sem = zk.Semaphore(sys.argv[2], identifier="kazoo", max_leases=int(sys.argv[3]))
sem.acquire(); print("held", flush=True)
sys.stdin.readline()
print("holders " + ",".join(sorted(sem.lease_holders())), flush=True)
sys.stdin.readline(); sem.release(); print("released", flush=True)
from kazoo.exceptions import LockTimeout
def attempt(timeout):
    try:
        return "got" if sem.acquire(timeout=timeout) else "busy"
    except LockTimeout:
        return "busy"
sys.stdin.readline(); print(attempt(1.5), flush=True)
sys.stdin.readline(); print(attempt(10), flush=True)
sem.release()
try:
    zk.Semaphore(sys.argv[2], max_leases=int(sys.argv[3]) + 1).acquire(timeout=1)
    print("accepted another N", flush=True)
except ValueError:
    print("mismatch", flush=True)
zk.stop(); zk.close()
`

// TestKazooSemaphoreInterop: a kazoo Semaphore and ours share the permits
// of one path, each sees the other's holders, and each refuses the other's
// N when it differs.
func TestKazooSemaphoreInterop(t *testing.T) {
	srv := startZK(t)
	ctx := t.Context()
	ours := newSemaphores(t, srv.Endpoint(), zklock.WithPrefix("/sems"))
	sem, err := ours.Semaphore("reports", 2)
	if err != nil {
		t.Fatal(err)
	}
	kazoo := startKazoo(t, kazooSemaphoreScript, srv.Endpoint(), "/sems/reports", "2")
	kazoo.expect("held")
	// kazoo holds one of two: we get the other, not two.
	if _, err := sem.AcquireN(ctx, 2, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("took 2 permits while kazoo holds 1 of 2: %v", err)
	}
	mine, err := sem.Acquire(ctx, lock.WithHolder("go"), lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err := ours.Inspect(ctx, "reports")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, h := range info.Holders {
		labels = append(labels, h.Holder)
	}
	if info.Permits != 2 || info.Used != 2 || strings.Join(labels, ",") != "kazoo,go" {
		t.Fatalf("Inspect = %+v, want N 2, kazoo then go", info)
	}
	// Another N is refused while kazoo holds with 2.
	three, _ := ours.Semaphore("reports", 3)
	if _, err := three.Acquire(ctx, lock.WithWait(0)); !errors.Is(err, semaphore.ErrMismatch) {
		t.Fatalf("Acquire with N=3 beside kazoo's N=2 = %v, want ErrMismatch", err)
	}
	kazoo.send("")
	kazoo.expect("holders go,kazoo")
	kazoo.send("") // kazoo releases
	kazoo.expect("released")
	other, err := sem.Acquire(ctx, lock.WithWait(0), lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("the permit kazoo released: %v", err)
	}
	kazoo.send("") // kazoo tries while we hold both
	kazoo.expect("busy")
	kazoo.send("") // kazoo waits; we release one
	time.Sleep(300 * time.Millisecond)
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	kazoo.expect("got")
	kazoo.expect("mismatch")
	if err := mine.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphoreWaiterStandsInLineOnceCounted: once Waiting counts an
// Acquire, its node is in the line for the semaphore's lock on the server.
// Waiters are served in the order of their nodes, so a waiter counted before
// its node exists could be overtaken by the next one to arrive: of four
// waiters started one after another, the fourth could get a permit freed
// for the first three.
func TestSemaphoreWaiterStandsInLineOnceCounted(t *testing.T) {
	srv := startZK(t)
	admin := plainConn(t, srv)
	a, b := newSemaphores(t, srv.Endpoint()), newSemaphores(t, srv.Endpoint())
	sa, _ := a.Semaphore("line", 1)
	sb, _ := b.Semaphore("line", 1)
	held, err := sa.Acquire(t.Context(), lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lockDir := zklock.DefaultPrefix + "/line-__lock__"
	for i := range 3 {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if p, err := sb.Acquire(ctx, lock.WithTTL(10*time.Second)); err == nil {
				_ = p.Release(context.Background())
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for sb.Waiting() < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never counted", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
		kids, _, err := admin.Children(lockDir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		cancel()
		<-done
		if len(kids) != 1 {
			t.Fatalf("waiter %d: counted as waiting with %d nodes in the line for the semaphore's lock, want 1", i, len(kids))
		}
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
