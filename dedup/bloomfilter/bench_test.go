package bloomfilter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// benchFilter opens a filter of two million ids at 1% on a private
// redis-server, so that the server's command statistics are this
// benchmark's alone. The filter is in its second generation and the first
// is full (half its bits set at random, as a full generation's are), so
// that a check reads both generations as it does in steady state.
func benchFilter(b *testing.B) (*redis.Client, *bloomfilter.Filter) {
	c, f := freshFilter(b)
	ctx := context.Background()
	keys := f.Keys()
	full := make([]byte, f.Sizing().Bits/8+1)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range full {
		full[i] = byte(r.Uint32())
	}
	zero := make([]byte, len(full))
	// keys: state, current, previous. The current generation expires
	// two periods after its start, now.
	if err := c.Set(ctx, keys[2], full, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.Set(ctx, keys[1], zero, 2*bloomfilter.DefaultPeriod).Err(); err != nil {
		b.Fatal(err)
	}
	if err := c.HSet(ctx, keys[0], "g", 1, "c:1", 0).Err(); err != nil {
		b.Fatal(err)
	}
	if _, err := f.TestAndAdd(ctx, "warm-again"); err != nil { // learns generation 1
		b.Fatal(err)
	}
	if st, err := f.Stats(ctx); err != nil || st.Generation != 1 || st.Previous.FillRatio < 0.49 {
		b.Fatalf("steady state: %+v, %v", st, err)
	}
	return c, f
}

// freshFilter opens a filter like benchFilter's, left in its first
// generation (no previous bitmap), as BenchmarkTestAndAddFirstRelease's.
func freshFilter(b *testing.B) (*redis.Client, *bloomfilter.Filter) {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { c.Close() })
	f, err := bloomfilter.New(c, "bench", 2_000_000, 0.01)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.TestAndAdd(context.Background(), "warm"); err != nil { // loads the script, makes the bitmap
		b.Fatal(err)
	}
	return c, f
}

// benchTestAndAdd is f's check-and-add of one new id per call.
func benchTestAndAdd(b *testing.B, c *redis.Client, f *bloomfilter.Filter) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		if _, err := f.TestAndAdd(ctx, fmt.Sprintf("msg-%d", i)); err != nil {
			b.Fatal(err)
		}
	})
}

// benchTestAndAddBatch is f's check-and-add of batch new ids per call.
func benchTestAndAddBatch(b *testing.B, c *redis.Client, f *bloomfilter.Filter, batch int) {
	ctx := context.Background()
	b.ReportAllocs()
	ids := make([]string, batch)
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		for j := range ids {
			i++
			ids[j] = fmt.Sprintf("msg-%d", i)
		}
		if _, err := f.TestAndAddBatch(ctx, ids); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkTestAndAddFirstGeneration is BenchmarkTestAndAdd in the first
// generation, to compare with BenchmarkTestAndAddFirstRelease.
func BenchmarkTestAndAddFirstGeneration(b *testing.B) {
	c, f := freshFilter(b)
	benchTestAndAdd(b, c, f)
}

// BenchmarkTestAndAddBatchFirstGeneration is BenchmarkTestAndAddBatch in
// the first generation, to compare with
// BenchmarkTestAndAddBatchFirstRelease; the metrics are per call.
func BenchmarkTestAndAddBatchFirstGeneration(b *testing.B) {
	c, f := freshFilter(b)
	benchTestAndAddBatch(b, c, f, 100)
}

// BenchmarkTestAndAdd is the check-and-add of one new id per call: the
// Redis commands and time it costs (srv-cmds/op; srv-top-us/op counts the
// script once, srv-us/op the plain commandstats sum, which counts the
// script's commands twice; srv-cpu-us/op the server's CPU, network
// included) and the client's allocations.
func BenchmarkTestAndAdd(b *testing.B) {
	c, f := benchFilter(b)
	benchTestAndAdd(b, c, f)
}

// BenchmarkTestAndAddBatch is the check-and-add of 100 new ids per call;
// the metrics are per id.
func BenchmarkTestAndAddBatch(b *testing.B) {
	c, f := benchFilter(b)
	const batch = 100
	benchTestAndAddBatch(b, c, f, batch)
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*batch), "ns/id")
}

// BenchmarkLossyCycle is a Deduper's full cycle on the filter alone, one new
// message per call: Claim (check and claim key) and Done (add, claim key
// deleted), two script calls. A message the full previous generation
// reports seen (a false positive, about 0.4% of them) is skipped.
func BenchmarkLossyCycle(b *testing.B) {
	c, f := benchFilter(b)
	ctx := context.Background()
	s := bloomfilter.NewLossy(f)
	b.ReportAllocs()
	i := 0
	testsvc.ReportRedisCost(b, c, func() {
		i++
		id := fmt.Sprintf("msg-%d", i)
		cl, err := s.Claim(ctx, id, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if cl.State != dedup.Claimed {
			return
		}
		if err := s.Done(ctx, id, cl.Token, time.Hour); err != nil {
			b.Fatal(err)
		}
	})
}
