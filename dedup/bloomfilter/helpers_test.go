package bloomfilter_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// shared connects to the shared Redis and returns a key prefix of the
// test's own; every key under it is deleted when the test ends.
func shared(t *testing.T) (*redis.Client, string) { return testsvc.RedisClient(t) }

// newFilter opens a filter under the test's prefix.
func newFilter(t *testing.T, c *redis.Client, prefix string, n int64, p float64, opts ...bloomfilter.Option) *bloomfilter.Filter {
	t.Helper()
	f, err := bloomfilter.New(c, "f", n, p, append([]bloomfilter.Option{bloomfilter.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ids returns n deterministic ids: the positions, and so every count the
// tests take, are the same on every run.
func ids(kind string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", kind, from+i)
	}
	return out
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// testParallel is f.TestBatch over ids in 4 concurrent parts: checks do not
// change the filter, so the answers are those of one call.
func testParallel(t *testing.T, f *bloomfilter.Filter, ids []string) []bool {
	t.Helper()
	out := make([]bool, len(ids))
	part := (len(ids) + 3) / 4
	var wg sync.WaitGroup
	for lo := 0; lo < len(ids); lo += part {
		hi := min(lo+part, len(ids))
		wg.Go(func() {
			got, err := f.TestBatch(context.Background(), ids[lo:hi])
			if err != nil {
				t.Error(err)
				return
			}
			copy(out[lo:hi], got)
		})
	}
	wg.Wait()
	return out
}
