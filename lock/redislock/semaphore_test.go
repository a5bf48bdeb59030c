package redislock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
	"github.com/latchkey-go/latchkey/semaphore/semaphoretest"
)

// TestSemaphoreConformance runs the semaphore suite against the shared
// Redis, with and without batching.
func TestSemaphoreConformance(t *testing.T) {
	for _, batching := range []bool{true, false} {
		name := "Batching"
		if !batching {
			name = "NoBatching"
		}
		t.Run(name, func(t *testing.T) {
			addr, prefix, admin := sharedRedis(t)
			var conns sync.Map // *semaphore.Client -> its *redis.Client
			semaphoretest.Run(t, semaphoretest.Harness{
				New: func(t *testing.T) *semaphore.Client {
					rc := newClient(t, addr)
					c, err := NewSemaphores(rc, WithPrefix(prefix), WithBatching(batching))
					if err != nil {
						t.Fatal(err)
					}
					conns.Store(c, rc)
					return c
				},
				Revoke: func(t *testing.T, name string) {
					ends, holders := redisnode.SemaphoreKeys(prefix, name)
					if err := admin.Del(ctxT(t), ends, holders).Err(); err != nil {
						t.Errorf("revoke: %v", err)
					}
				},
				Cut: func(t *testing.T, c *semaphore.Client) {
					rc, _ := conns.Load(c)
					_ = rc.(interface{ Close() error }).Close()
				},
			})
		})
	}
}

// TestSemaphoreBadInputTouchesNoServer checks that bad input is refused
// before any command: the client points at a port nobody listens on.
func TestSemaphoreBadInputTouchesNoServer(t *testing.T) {
	if _, err := NewSemaphores(nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("NewSemaphores(nil) = %v, want ErrInvalid", err)
	}
	c, err := NewSemaphores(newClient(t, "127.0.0.1:1"), WithPrefix("bad{"))
	if !errors.Is(err, lock.ErrInvalid) || c != nil {
		t.Fatalf("NewSemaphores with a brace in the prefix = %v, want ErrInvalid", err)
	}
	c, err = NewSemaphores(newClient(t, "127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Semaphore("n", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.AcquireN(ctx, 3); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("AcquireN(3 of 2) = %v, want ErrInvalid (and no dial)", err)
	}
	if _, err := s.Acquire(ctx); errors.Is(err, lock.ErrInvalid) || err == nil {
		t.Fatalf("Acquire against no server = %v, want a connection error", err)
	}
}

// TestOneNameOneResource: on one Redis, a lock, an election, a read-write
// lock and a semaphore of one name exclude each other; an acquisition in one
// mode while another holds the name is refused, naming that mode.
func TestOneNameOneResource(t *testing.T) {
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	admin := newClient(t, addr)
	t.Cleanup(func() { deletePrefix(t, admin, DefaultPrefix+"{"+prefix) })
	modetest.Run(t, modeHarness(func(t *testing.T) Client { return newClient(t, addr) }, func(t *testing.T) string { return prefix + t.Name() }))
}

// modeHarness opens each primitive on a client of its own from client.
func modeHarness(client func(t *testing.T) Client, key func(t *testing.T) string) modetest.Harness {
	return modetest.Harness{
		Lock: func(t *testing.T) lock.Locker { return newLocker(t, client(t)) },
		RW: func(t *testing.T) *rwlock.Locker {
			l, err := NewRW(client(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		},
		Semaphore: func(t *testing.T) *semaphore.Client {
			c, err := NewSemaphores(client(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Key: key,
	}
}
