package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/lock"
)

// TestErrorsReadOnce checks that each layer of an error adds only what it
// knows: an acquire that cannot reach Redis, a renewal refused because the
// lock was deleted, and the release of that lost lease each name the
// operation once and say what happened in words.
func TestErrorsReadOnce(t *testing.T) {
	t.Parallel()
	t.Run("acquire", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		_, err := newLocker(t, c).Acquire(ctxT(t), "k", lock.WithWait(0))
		if err == nil {
			t.Fatal("Acquire on an unreachable server succeeded")
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "lock: acquire: redislock: dial tcp 127.0.0.1:1: ") || strings.Count(msg, "acquire") != 1 {
			t.Fatalf("Acquire error %q, want %q followed by the dial error, naming the operation once",
				msg, "lock: acquire: redislock: dial tcp 127.0.0.1:1: ")
		}
	})
	t.Run("lost", func(t *testing.T) {
		addr, prefix, admin := sharedRedis(t)
		lease, err := newLocker(t, newClient(t, addr), WithPrefix(prefix)).Acquire(ctxT(t), "k", lock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Del(ctxT(t), redisnode.LockKey(prefix, "k")).Err(); err != nil {
			t.Fatal(err)
		}
		<-lease.Done()
		const lost = "lock: lease lost: renewal refused: redislock: the lock expired or another owner holds it"
		if got := lease.Err().Error(); got != lost || !errors.Is(lease.Err(), lock.ErrNotHeld) || !errors.Is(lease.Err(), lock.ErrLeaseLost) {
			t.Fatalf("Err = %q, want %q wrapping ErrLeaseLost and ErrNotHeld", got, lost)
		}
		rerr := lease.Release(ctxT(t))
		const released = "lock: not held: lease lost: renewal refused: redislock: the lock expired or another owner holds it"
		if rerr == nil || rerr.Error() != released || !errors.Is(rerr, lock.ErrNotHeld) || !errors.Is(rerr, lock.ErrLeaseLost) {
			t.Fatalf("Release = %v, want %q wrapping ErrNotHeld and ErrLeaseLost", rerr, released)
		}
	})
}
