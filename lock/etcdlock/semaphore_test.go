package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/semaphore"
	"github.com/latchkey-go/latchkey/semaphore/semaphoretest"
)

// TestSemaphoreConformance runs the semaphore suite on a private etcd; each
// Client has its own etcd client, as a separate process would.
func TestSemaphoreConformance(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	admin := newClient(t, srv)
	var clients sync.Map // *semaphore.Client -> *clientv3.Client
	semaphoretest.Run(t, semaphoretest.Harness{
		// etcd grants leases in whole seconds, at least 1.5 election
		// timeouts: a 2 s TTL keeps renewal well inside them.
		TTL: 2 * time.Second,
		New: func(t *testing.T) *semaphore.Client {
			c := newClient(t, srv)
			s, err := etcdlock.NewSemaphores(c)
			if err != nil {
				t.Fatal(err)
			}
			clients.Store(s, c)
			return s
		},
		Revoke: func(t *testing.T, name string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := admin.Delete(ctx, etcdlock.DefaultSemaphorePrefix+name+"/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
		},
		Cut: func(t *testing.T, s *semaphore.Client) {
			c, _ := clients.Load(s)
			_ = c.(*clientv3.Client).Close()
		},
	})
}

// TestSemaphoreArrivalOrderAcrossClients checks the queue on the server: three
// waiters of three Clients take the freed permits in arrival order, and
// each waiter's key stays in the queue behind the holders until then.
func TestSemaphoreArrivalOrderAcrossClients(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	admin := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sem := func() *semaphore.Semaphore {
		c, err := etcdlock.NewSemaphores(newClient(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Semaphore("jobs", 2)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	holder := sem()
	held, err := holder.AcquireN(ctx, 2, lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	var permits [3]*semaphore.Permit
	for i := range 3 {
		s := sem()
		go func() {
			p, err := s.Acquire(ctx, lock.WithTTL(10*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				got <- -1
				return
			}
			permits[i] = p
			got <- i
		}()
		// The next waiter starts once this one's key is queued.
		for semaphoreKeys(ctx, t, admin, "jobs") != int64(i+2) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := <-got, <-got
	if first < 0 || second < 0 || first+second != 1 {
		t.Fatalf("the two freed permits went to waiters %d and %d, want 0 and 1", first, second)
	}
	if err := permits[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if last := <-got; last != 2 {
		t.Fatalf("the next freed permit went to waiter %d, want 2", last)
	}
	for _, p := range permits[1:] {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := semaphoreKeys(ctx, t, admin, "jobs"); n != 0 {
		t.Fatalf("%d keys left after every release", n)
	}
	if _, err := etcdlock.NewSemaphores(nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("NewSemaphores(nil) = %v, want ErrInvalid", err)
	}
}

// semaphoreKeys returns how many keys name's semaphore has on the server:
// its holders' and its queued waiters'.
func semaphoreKeys(ctx context.Context, t *testing.T, admin *clientv3.Client, name string) int64 {
	t.Helper()
	g, err := admin.Get(ctx, etcdlock.DefaultSemaphorePrefix+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return g.Count
}
