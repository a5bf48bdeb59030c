package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The guard people write by hand: SET NX EX before the handler, duplicates
// rejected, no replay, failures lost. The baseline for the real cycle.
func BenchmarkHandWrittenGuard(b *testing.B) {
	c, prefix := benchClient(b)
	var n atomic.Int64
	benchParallel(b, func(ctx context.Context) {
		k := fmt.Sprint(prefix, "guard:", n.Add(1))
		if ok, err := c.SetNX(ctx, k, "1", 10*time.Minute).Result(); err != nil || !ok {
			b.Error(ok, err)
		}
	})
}

// BenchmarkDoFirstRequest is the full cycle for new keys: claim, run, record
// (2 round trips).
func BenchmarkDoFirstRequest(b *testing.B) {
	c, prefix := benchClient(b)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	var n atomic.Int64
	benchParallel(b, func(ctx context.Context) {
		k := fmt.Sprint("first:", n.Add(1))
		if _, err := idem.Do(ctx, s, k, func(context.Context) (int, error) { return 1, nil }, idem.WithRetention(10*time.Minute)); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkDoReplay replays a recorded result (1 round trip).
func BenchmarkDoReplay(b *testing.B) {
	c, prefix := benchClient(b)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	ctx := context.Background()
	fn := func(context.Context) (string, error) { return `{"charge":"ch_1","amount":100}`, nil }
	if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
		b.Fatal(err)
	}
	benchParallel(b, func(ctx context.Context) {
		if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
			b.Error(err)
		}
	})
}

// benchParallel runs fn from 64 goroutines.
func benchParallel(b *testing.B, fn func(context.Context)) {
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			fn(ctx)
		}
	})
}

func benchClient(b *testing.B) (*redis.Client, string) {
	c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(b), PoolSize: 64})
	prefix := testsvc.KeyPrefix(b)
	b.Cleanup(func() {
		ctx := context.Background()
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, prefix+"*", 5000).Result()
			if err != nil {
				break
			}
			if len(keys) > 0 {
				c.Unlink(ctx, keys...)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		_ = c.Close()
	})
	return c, prefix
}
