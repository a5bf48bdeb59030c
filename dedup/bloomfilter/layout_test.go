package bloomfilter

import (
	"context"
	_ "embed"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// filterV1 is the script of the first release, which read and set each bit
// with GETBIT and SETBIT. It kept the same keys and state hash.
//
//go:embed testdata/filter_v1.lua
var filterV1 string

// A filter written by the first release's script is read and extended by
// this one, and the other way round, with the same answers and the same
// generation state: the layout (keys, state hash fields, bit positions) is
// unchanged, so consumers of both versions may share a filter while they
// are upgraded.
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
	add := func(s *redis.Script, ids []string) []int64 {
		t.Helper()
		r, err := f.call(ctx, s, "add", ids, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(ids))
		for i := range out {
			out[i] = r[2*i]
		}
		return out
	}
	seen := func(r []int64) int {
		n := 0
		for _, v := range r {
			n += int(v)
		}
		return n
	}

	// The first release fills a generation and starts the next (25 ids at
	// capacity 20).
	a := ids("a", 25)
	if n := seen(add(v1, a)); n != 0 {
		t.Fatalf("first release: %d of 25 new ids seen", n)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Generation != 1 || st.Added != 5 {
		t.Fatalf("after the first release's adds: %+v, %v; want generation 1 with 5 ids", st, err)
	}
	// This release sees all of them, adds others where the first release
	// would have (15 fill generation 1, then generation 2 starts), and the
	// first release sees those.
	if n := seen(add(filterScript, a)); n != len(a) {
		t.Fatalf("this release: %d of the first release's 25 ids seen, want all", n)
	}
	b := ids("b", 17)
	if n := seen(add(filterScript, b)); n != 0 {
		t.Fatalf("this release: %d of 17 new ids seen", n)
	}
	st, err = f.Stats(ctx)
	if err != nil || st.Generation != 2 || st.Added != 2 {
		t.Fatalf("after this release's adds: %+v, %v; want generation 2 with 2 ids", st, err)
	}
	if n := seen(add(v1, b)); n != len(b) {
		t.Fatalf("first release: %d of this release's 17 ids seen, want all", n)
	}
	// Generation 0 is gone: the first release's first 20 ids are new again
	// to both.
	if n := seen(add(filterScript, a[:10])); n > 1 {
		t.Errorf("this release: %d of 10 ids of a dropped generation seen", n)
	}
	if n := seen(add(v1, a[10:20])); n > 1 {
		t.Errorf("first release: %d of 10 ids of a dropped generation seen", n)
	}
}
