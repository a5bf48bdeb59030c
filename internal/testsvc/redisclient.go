package testsvc

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisClient connects to the shared Redis (RedisAddr) and returns a key
// prefix of the test's own (KeyPrefix); when the test ends, every key under
// the prefix is deleted and the client closed.
func RedisClient(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
	prefix := KeyPrefix(t)
	t.Cleanup(func() {
		DeleteKeys(c, prefix)
		_ = c.Close()
	})
	return c, prefix
}

// DeleteKeys deletes every key under prefix that c reaches, for cleanups.
func DeleteKeys(c *redis.Client, prefix string) {
	ctx := context.Background()
	var keys []string
	for it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
		keys = append(keys, it.Val())
	}
	for _, k := range keys {
		c.Del(ctx, k)
	}
}
