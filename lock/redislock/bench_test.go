package redislock_test

import (
	"context"
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
	ctx := context.Background()
	pair := func(key string) {
		ok, err := c.SetNX(ctx, key, "v", 30*time.Second).Result()
		if err != nil || !ok {
			b.Fatalf("SET NX: %v %v", ok, err)
		}
		if err := rawRelease.Run(ctx, c, []string{key}, "v").Err(); err != nil {
			b.Fatal(err)
		}
	}
	pair("warm")
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		pair("order:" + strconv.Itoa(i%100))
	})
}

func benchPairs(b *testing.B, opts []lock.Option) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	l, err := redislock.New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	pair := func(key string) {
		lease, err := l.Acquire(ctx, key, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	pair("warm") // loads the scripts
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		pair("order:" + strconv.Itoa(i%100))
	})
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
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	l, err := redislock.New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	par := max(16/runtime.GOMAXPROCS(0), 1)
	var ids atomic.Int64
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) {
			key := "raw:" + strconv.FormatInt(ids.Add(1), 10)
			for pb.Next() {
				ok, err := c.SetNX(ctx, key, "v", 30*time.Second).Result()
				if err != nil || !ok {
					b.Errorf("SET NX: %v %v", ok, err)
					return
				}
				if err := rawRelease.Run(ctx, c, []string{key}, "v").Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	for _, bc := range []struct {
		name string
		opts []lock.Option
	}{
		{"WithWait(0)", []lock.Option{lock.WithWait(0)}},
		{"default", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				key := "order:" + strconv.FormatInt(ids.Add(1), 10)
				for pb.Next() {
					lease, err := l.Acquire(ctx, key, bc.opts...)
					if err != nil {
						b.Error(err)
						return
					}
					if err := lease.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkContended is 16 goroutines of one Locker taking turns on one
// key, waiting as users wait (default options): ns/op is the time per
// acquisition, hand-off included.
func BenchmarkContended(b *testing.B) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	l, err := redislock.New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(max(16/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lease, err := l.Acquire(ctx, "contended")
			if err != nil {
				b.Error(err)
				return
			}
			if err := lease.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
