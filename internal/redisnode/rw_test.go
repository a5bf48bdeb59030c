package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/rwlock"
)

// TestRWReleaseOfAnUnknownReader: a reader whose attempt's answer was lost
// (here: forgotten) is still found and deleted by its release, as the
// Manager's release after a cancelled attempt asks, instead of keeping
// writers out until its TTL.
func TestRWReleaseOfAnUnknownReader(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	defer c.Close()
	prefix := testsvc.KeyPrefix(t)
	n, err := New(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rw := n.RW()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer c.Del(ctx, RWKeys(prefix, "prices")...)
	const owner = "0123456789abcdef0123456789abcdef lost *answer?"
	if _, _, err := rw.TryAcquire(ctx, "prices", owner, rwlock.Read, time.Minute, false); err != nil {
		t.Fatal(err)
	}
	rw.readers.Delete(owner) // the answer never came
	if err := rw.Release(ctx, "prices", owner, rwlock.Read); err != nil {
		t.Fatalf("release of a reader whose token is unknown: %v", err)
	}
	if _, _, err := rw.TryAcquire(ctx, "prices", "fedcba9876543210fedcba9876543210", rwlock.Write, time.Minute, false); err != nil {
		t.Fatalf("writer after the release: %v", err)
	}
}
