package bloomfilter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// benchLossyCycle is Lossy's Claim then Done of one new id per call through
// script, in the first generation, as the two benchmarks below compare.
func benchLossyCycle(b *testing.B, script *redis.Script) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	f, err := New(c, "bench", 2_000_000, 0.01)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.call(ctx, script, "add", []string{"warm"}, nil, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		id, tok := []string{fmt.Sprintf("msg-%d", i)}, []string{"token"}
		r, err := f.call(ctx, script, "claim", id, tok, time.Minute)
		if err != nil || r[0] != 1 {
			b.Fatal(r, err)
		}
		if r, err := f.call(ctx, script, "done", id, tok, 0); err != nil || r[0] != 1 {
			b.Fatal(r, err)
		}
	})
}

// BenchmarkLossyCycleFirstGeneration is the Lossy cycle through this
// release's script, in the first generation like
// BenchmarkLossyCycleFirstRelease.
func BenchmarkLossyCycleFirstGeneration(b *testing.B) { benchLossyCycle(b, filterScript) }
