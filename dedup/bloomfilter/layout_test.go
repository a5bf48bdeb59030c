package bloomfilter

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// filterV1 is the script of the first release, which read and set each bit
// with GETBIT and SETBIT. It kept the same keys and state hash.
//
//go:embed testdata/filter_v1.lua
var filterV1 string

// A filter written by the first release's script (generations at bits:0
// and bits:1 by parity, the count in the state hash) is taken over by this
// one at its first step: it answers for the ids the first release added,
// keeps its generation and count, and the first release's clients are
// refused from then on with the error they report as ErrSizingMismatch,
// instead of answering from generations this release no longer writes.
func TestLayoutOfTheFirstRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testsvc.RedisClient(t)
	v1 := redis.NewScript(filterV1)
	f, err := New(c, "f", 20, 0.001, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(kind string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d", kind, i)
		}
		return out
	}
	base := prefix + "{f}:"
	legacy := []string{base + "state", base + "bits:0", base + "bits:1"}
	// The first release fills a generation and starts the next (25 ids at
	// capacity 20).
	a := ids("a", 25)
	r, err := addFirstRelease(ctx, c, f, v1, legacy, a)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range r {
		if v != 0 {
			t.Fatalf("first release: %s seen, want new", a[i])
		}
	}
	got, err := f.TestAndAddBatch(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if !v {
			t.Errorf("this release: %s, added by the first release, is new to it", a[i])
		}
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Generation != 1 || st.Added != 5 {
		t.Fatalf("after the take-over: %+v, %v; want generation 1 with 5 ids", st, err)
	}
	if n := c.Exists(ctx, legacy[1], legacy[2]).Val(); n != 0 {
		t.Errorf("%d of the first release's bitmaps left after the take-over", n)
	}
	for _, k := range f.Keys()[1:] {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no expiry after the take-over (PTTL %v)", k, ttl)
		}
	}
	if _, err := addFirstRelease(ctx, c, f, v1, legacy, ids("b", 1)); err == nil || !strings.Contains(err.Error(), "bloomfilter: filter was created with") {
		t.Errorf("first release after the take-over: %v, want its sizing error", err)
	}
}

// addFirstRelease adds ids to f's name by the first release's script v1,
// on its keys, and returns for each id 1 if it was seen and 0 if new.
func addFirstRelease(ctx context.Context, c *redis.Client, f *Filter, v1 *redis.Script, keys, ids []string) ([]int64, error) {
	args := []any{"add", f.size.Bits, f.size.Hashes, f.size.Capacity, msec(f.period), 1, len(ids)}
	for _, id := range ids {
		args = append(args, "")
		for _, p := range appendPositions(nil, id, f.size.Bits, f.size.Hashes) {
			args = append(args, p)
		}
	}
	r, err := v1.Run(ctx, c, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(ids))
	for i := range out {
		out[i] = r[2*i]
	}
	return out, nil
}
