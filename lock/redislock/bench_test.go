package redislock_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// BenchmarkAcquireRelease is an uncontended acquire and release pair on a
// private redis-server, as users call it (default options, WithWait(0) or
// waiting allowed) and as the bench module did (WithTTL(30s)): the Redis
// commands per pair, those inside scripts included (srv-cmds/op), the
// server's time (srv-us/op) and the client's allocations.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []lock.Option
	}{
		{"WithWait(0)", []lock.Option{lock.WithWait(0)}},
		{"default", nil},
		{"WithTTL(30s)", []lock.Option{lock.WithTTL(30 * time.Second)}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPairs(b, bc.opts) })
	}
	b.Run("raw", benchRawPairs)
}

// benchRawPairs is benchPairs for raw go-redis SET NX PX and a Lua
// compare-and-delete, the yardstick of the Redis lock table in docs/performance.md.
func benchRawPairs(b *testing.B) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	benchSequential(b, c, func(key string) error { return rawPair(context.Background(), c, key) })
}

func benchPairs(b *testing.B, opts []lock.Option) {
	c, l := newBenchLocker(b)
	benchSequential(b, c, func(key string) error { return lockerPair(context.Background(), l, key, opts...) })
}

// benchSequential measures pair on c's server, one at a time, over 100
// keys, after one pair to warm up (which loads the scripts).
func benchSequential(b *testing.B, c *redis.Client, pair func(key string) error) {
	if err := pair("warm"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		if err := pair("order:" + strconv.Itoa(i%100)); err != nil {
			b.Fatal(err)
		}
	})
}

// newBenchLocker returns a client of a private redis-server and a Locker
// on it, both closed by b's cleanup.
func newBenchLocker(b *testing.B) (*redis.Client, *redislock.Locker) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	l, err := redislock.New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return c, l
}

// lockerPair takes key through l with opts and releases it.
func lockerPair(ctx context.Context, l *redislock.Locker, key string, opts ...lock.Option) error {
	lease, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

// rawPair takes key with SET NX PX and releases it with rawRelease.
func rawPair(ctx context.Context, c *redis.Client, key string) error {
	ok, err := c.SetNX(ctx, key, "v", 30*time.Second).Result()
	if err != nil || !ok {
		return fmt.Errorf("SET NX: %v %v", ok, err)
	}
	return rawRelease.Run(ctx, c, []string{key}, "v").Err()
}

// rawRelease is the compare-and-delete of the raw SET NX PX lock the
// parallel benchmarks measure latchkey against.
var rawRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// BenchmarkAcquireReleaseParallel is the uncontended pair at 16 goroutines
// (RunParallel with 8 per GOMAXPROCS on 2 cores), each on its own keys,
// default options and WithWait(0) as users call it, next to raw go-redis
// SET NX PX and a Lua compare-and-delete on the same server: compare their
// ns/op within one run.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	c, l := newBenchLocker(b)
	ctx := context.Background()
	var ids atomic.Int64
	ownKey := func(prefix string) func() string {
		return func() string { return prefix + strconv.FormatInt(ids.Add(1), 10) }
	}
	b.Run("raw", func(b *testing.B) {
		benchParallel(b, ownKey("raw:"), func(key string) error { return rawPair(ctx, c, key) })
	})
	for _, bc := range []struct {
		name string
		opts []lock.Option
	}{
		{"WithWait(0)", []lock.Option{lock.WithWait(0)}},
		{"default", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchParallel(b, ownKey("order:"), func(key string) error { return lockerPair(ctx, l, key, bc.opts...) })
		})
	}
}

// BenchmarkContended is 16 goroutines of one Locker taking turns on one
// key, waiting as users wait (default options): ns/op is the time per
// acquisition, hand-off included.
func BenchmarkContended(b *testing.B) {
	_, l := newBenchLocker(b)
	ctx := context.Background()
	benchParallel(b, func() string { return "contended" }, func(key string) error { return lockerPair(ctx, l, key) })
}

// benchParallel runs pair at 16 goroutines (8 per GOMAXPROCS on 2 cores),
// each on the key that key returns it, a goroutine stopping at its first
// error.
func benchParallel(b *testing.B, key func() string, pair func(key string) error) {
	b.ReportAllocs()
	b.SetParallelism(max(16/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		k := key()
		for pb.Next() {
			if err := pair(k); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
