package redisnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// Sixteen goroutines taking turns on one key through one Locker: every
// public release (the Manager's turn for other Lockers) reached only the
// Locker's own subscription, and its waiter slept through the message's
// delivery and its random delay, half a millisecond a hand-off, a tenth of
// raw SET NX's throughput. A release that reached no other subscriber wakes
// the Locker's waiters before it returns.
func TestReleaseHeardByNoOtherLockerWakesAtOnce(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wake, stop, err := n.WatchRelease(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for range 20 {
		if _, _, err := n.TryAcquire(ctx, "k", "holder", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// A waiter's failed attempt marks the key as waited for, so the
		// release publishes.
		if _, _, err := n.TryAcquire(ctx, "k", "waiter", 10*time.Second); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("attempt on a held key: %v, want ErrNotAcquired", err)
		}
		select { // a wake-up left from before
		case <-wake:
		default:
		}
		if err := n.Release(ctx, "k", "holder"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		default:
			t.Fatal("the release reached no other Locker, and the waiter was not woken by the time it returned")
		}
	}
}
