package etcdlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// BenchmarkAcquireRelease measures one uncontended lock/unlock pair on a
// private etcd, ours beside etcd's concurrency.Mutex (one Session per
// goroutine, as a service keeps one per worker), each goroutine on a name of
// its own. The bench module compares them across goroutine counts; this is
// the quick check: go test -bench . -cpu 1,16 ./lock/etcdlock/
func BenchmarkAcquireRelease(b *testing.B) {
	srv := testsvc.StartEtcd(b)
	c := newClient(b, srv)
	ctx := context.Background()
	var n atomic.Int64
	name := func() string { return "bench-" + strconv.FormatInt(n.Add(1), 36) }
	b.Run("Locker", func(b *testing.B) {
		l := newLocker(b, c)
		b.RunParallel(func(pb *testing.PB) {
			key := name()
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
	b.Run("Mutex", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			s, err := concurrency.NewSession(c, concurrency.WithTTL(30))
			if err != nil {
				b.Error(err)
				return
			}
			defer s.Close()
			m := concurrency.NewMutex(s, name())
			for pb.Next() {
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
