package redislock_test

import (
	"context"
	"strconv"
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
