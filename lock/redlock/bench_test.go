package redlock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// BenchmarkAcquireRelease measures one uncontended acquire and release on
// five private servers, through the Locker and through the backend alone
// (without the Manager's release watch and lease bookkeeping).
func BenchmarkAcquireRelease(b *testing.B) {
	c := startCluster(b)
	l := c.locker(b)
	ctx := context.Background()
	b.Run("Locker", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			key := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36)
			for pb.Next() {
				lease, err := l.Acquire(ctx, key, lock.WithTTL(30*time.Second))
				if err != nil {
					b.Error(err)
					return
				}
				if err := lease.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("backend", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			key := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36)
			for pb.Next() {
				if _, _, err := l.b.TryAcquire(ctx, key, "owner"+key, 30*time.Second); err != nil {
					b.Error(err)
					return
				}
				if err := l.b.Release(ctx, key, "owner"+key); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
