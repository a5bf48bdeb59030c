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

// Owners as one lock.Manager makes them: the first 16 hex digits are the
// Manager's, the rest the lease's.
const (
	holderOwner = "0123456789abcdef" + "0000000000000001"
	waiterOwner = "0123456789abcdef" + "0000000000000002"
	otherOwner  = "fedcba9876543210" + "0000000000000003" // another Manager's
)

// twoNodes starts a Redis of its own and returns a context of 30 s for the
// test, a client of that Redis, and two Nodes (two Lockers) on the client;
// t's cleanup closes them.
func twoNodes(t *testing.T) (ctx context.Context, c *redis.Client, n, other *Node) {
	t.Helper()
	srv := testsvc.StartRedis(t)
	c = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	nodes := make([]*Node, 2)
	for i := range nodes {
		node, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Close() })
		nodes[i] = node
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, c, nodes[0], nodes[1]
}

// Sixteen goroutines taking turns on one key through one Locker: every
// public release (the Manager's turn for other Lockers) reached only the
// Locker's own subscription, and its waiter slept through the message's
// delivery and its random delay, half a millisecond a hand-off, a tenth of
// raw SET NX's throughput. With another Locker subscribed to the release
// channel (it waited once for some other key) every public release
// published, to the same effect: a tenth of raw's acquisitions/s. A
// waiter's attempt against a holder of its own Locker does not mark the key,
// the release publishes nothing, and it wakes the Locker's waiters before it
// returns.
func TestReleaseWithNoOtherLockersWaiterWakesAtOnce(t *testing.T) {
	t.Parallel()
	ctx, _, n, other := twoNodes(t)

	// Another Locker subscribed, waiting for another key.
	_, stopOther, err := other.WatchRelease(ctx, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer stopOther()
	wake, stop, err := n.WatchRelease(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for range 20 {
		if _, _, err := n.TryAcquire(ctx, "k", holderOwner, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.TryAcquire(ctx, "k", waiterOwner, 10*time.Second); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("attempt on a held key: %v, want ErrNotAcquired", err)
		}
		select { // a wake-up left from before
		case <-wake:
		default:
		}
		if err := n.Release(ctx, "k", holderOwner); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		default:
			t.Fatal("no other Locker waited for the key, and the waiter was not woken by the time the release returned")
		}
	}
}

// A waiter of another Locker marks the key, and the release publishes: it
// must hear it, as the releasing Locker's own waiters do (after the same
// random delay, for even odds), not only by its poll.
func TestReleasePublishesForAnotherLockersWaiter(t *testing.T) {
	t.Parallel()
	ctx, c, n, other := twoNodes(t)

	wake, stop, err := other.WatchRelease(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, _, err := n.TryAcquire(ctx, "k", holderOwner, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.TryAcquire(ctx, "k", otherOwner, 10*time.Second); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("attempt on a held key: %v, want ErrNotAcquired", err)
	}
	if got := c.Exists(ctx, LockKey(n.prefix, "k")+":waiters").Val(); got != 1 {
		t.Fatalf("another Locker's waiter left %d waiters flags, want 1", got)
	}
	select { // a wake-up left from before
	case <-wake:
	default:
	}
	if err := n.Release(ctx, "k", holderOwner); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the other Locker's waiter never heard the release")
	}
}
