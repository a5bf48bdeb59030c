package bloomfilter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// benchFirstRelease measures the first release's script (testdata) on the
// steps of BenchmarkTestAndAdd and BenchmarkTestAndAddBatch, with the
// same filter, on the same kind of private server, so that go test -bench
// 'TestAndAdd' -count N alternates the two scripts and compares them in
// one run. The filter is in its first generation: the previous bitmap does
// not exist, as in bench/'s cost table.
func benchFirstRelease(b *testing.B, batch int) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	f, err := New(c, "bench", 2_000_000, 0.01)
	if err != nil {
		b.Fatal(err)
	}
	v1 := redis.NewScript(filterV1)
	ctx := context.Background()
	if _, err := f.call(ctx, v1, "add", []string{"warm"}, nil, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	ids := make([]string, batch)
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		for j := range ids {
			i++
			ids[j] = fmt.Sprintf("msg-%d", i)
		}
		if _, err := f.call(ctx, v1, "add", ids, nil, 0); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkTestAndAddFirstRelease is one new id per call through the first
// release's script (a GETBIT per bit read, a SETBIT per bit set).
func BenchmarkTestAndAddFirstRelease(b *testing.B) { benchFirstRelease(b, 1) }

// BenchmarkTestAndAddBatchFirstRelease is 100 new ids per call through the
// first release's script; the metrics are per call.
func BenchmarkTestAndAddBatchFirstRelease(b *testing.B) { benchFirstRelease(b, 100) }

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

// BenchmarkLossyCycleFirstRelease is the Lossy cycle through the first
// release's script.
func BenchmarkLossyCycleFirstRelease(b *testing.B) { benchLossyCycle(b, redis.NewScript(filterV1)) }

// BenchmarkLossyCycleFirstGeneration is the Lossy cycle through this
// release's script, in the first generation like
// BenchmarkLossyCycleFirstRelease.
func BenchmarkLossyCycleFirstGeneration(b *testing.B) { benchLossyCycle(b, filterScript) }
