package zklock_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// TestOneNameOneResource: on one ZooKeeper, a semaphore and a lock (or an
// election, or a read-write lock) of one name exclude each other, the later
// refused with a *lock.ModeError; a lock and a read-write lock of one name
// share one queue, as kazoo's Lock and WriteLock do, and wait for each other.
func TestOneNameOneResource(t *testing.T) {
	srv := startZK(t)
	modetest.Run(t, modetest.Harness{
		Lock:             func(t *testing.T) lock.Locker { return newLocker(t, srv) },
		RW:               func(t *testing.T) *rwlock.Locker { return newRW(t, srv) },
		Semaphore:        func(t *testing.T) *semaphore.Client { return newSemaphores(t, srv.Endpoint()) },
		Key:              func(t *testing.T) string { return "modes-" + t.Name()[len("TestOneNameOneResource/"):] },
		LockQueuesWithRW: true,
	})
}
