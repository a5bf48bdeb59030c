package bloomfilter

import (
	"context"
	"fmt"
	"testing"

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
