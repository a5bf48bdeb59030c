package etcdlock_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// TestOneNameOneResource: on one etcd, a lock, an election, a read-write
// lock and a semaphore of one name exclude each other; an acquisition in one
// mode while another holds the name is refused, naming that mode.
func TestOneNameOneResource(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	oneNameOneResource(t, srv)
}

// The same under a prefix, as a service whose etcd role may use only its
// own prefix runs them: locks, read-write locks and semaphores all live
// under it and still exclude each other.
func TestOneNameOneResourceUnderAPrefix(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	oneNameOneResource(t, srv, etcdlock.WithPrefix("payments/"))
}

func oneNameOneResource(t *testing.T, srv *testsvc.EtcdServer, opts ...etcdlock.Option) {
	modetest.Run(t, modetest.Harness{
		Lock: func(t *testing.T) lock.Locker { return newLocker(t, newClient(t, srv), opts...) },
		RW:   func(t *testing.T) *rwlock.Locker { return newRW(t, newClient(t, srv), opts...) },
		Semaphore: func(t *testing.T) *semaphore.Client {
			c, err := etcdlock.NewSemaphores(newClient(t, srv), opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Key: func(t *testing.T) string { return t.Name() },
	})
}
