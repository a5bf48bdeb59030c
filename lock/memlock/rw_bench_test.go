package memlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// BenchmarkPair measures acquire/release pairs on keys of their own, in
// process: what the read-write lock's Go side costs beside the lock's.
func BenchmarkPair(b *testing.B) {
	rw := memlock.NewRW()
	for _, c := range []struct {
		name string
		l    lock.Locker
	}{{"lock", memlock.New()}, {"read", rw.Readers()}, {"write", rw.Writers()}} {
		b.Run(c.name, func(b *testing.B) {
			var n atomic.Int64
			ctx := context.Background()
			b.RunParallel(func(pb *testing.PB) {
				key := "k" + strconv.FormatInt(n.Add(1), 10)
				for pb.Next() {
					lease, err := c.l.Acquire(ctx, key)
					if err != nil {
						b.Fatal(err)
					}
					if err := lease.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
