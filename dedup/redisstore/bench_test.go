package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// BenchmarkClaim claims one new id per call on a private redis-server: the
// Redis commands and time per claim (srv-cmds/op, srv-us/op) and the
// client's allocations.
func BenchmarkClaim(b *testing.B) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	s := redisstore.New(c)
	ctx := context.Background()
	if _, err := s.Claim(ctx, "warm", dedup.DefaultProcessingTTL); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		cl, err := s.Claim(ctx, "msg-"+strconv.Itoa(i), dedup.DefaultProcessingTTL)
		if err != nil || cl.State != dedup.Claimed {
			b.Fatal(cl, err)
		}
	})
}
