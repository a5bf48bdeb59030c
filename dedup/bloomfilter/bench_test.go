package bloomfilter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// benchFilter opens a filter of two million ids at 1% on a private
// redis-server, so that the server's command statistics are this
// benchmark's alone.
func benchFilter(b *testing.B) (*redis.Client, *bloomfilter.Filter) {
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

// BenchmarkTestAndAdd is the check-and-add of one new id per call: the
// Redis time and commands it costs (srv-us/op, srv-cmds/op) and the client's
// allocations.
func BenchmarkTestAndAdd(b *testing.B) {
	c, f := benchFilter(b)
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

// BenchmarkTestAndAddBatch is the check-and-add of 100 new ids per call;
// the metrics are per id.
func BenchmarkTestAndAddBatch(b *testing.B) {
	c, f := benchFilter(b)
	ctx := context.Background()
	b.ReportAllocs()
	const batch = 100
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
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*batch), "ns/id")
}
