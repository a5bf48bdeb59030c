package redislock

import (
	"testing"

	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestElection runs the election suite against the shared Redis: terms,
// Proclaim (one script that keeps the lock's expiry), and observers woken by
// the release channel.
func TestElection(t *testing.T) {
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	admin := newClient(t, addr)
	t.Cleanup(func() { deletePrefix(t, admin, prefix) })
	electtest.Run(t, electtest.Harness{
		New: func(t *testing.T) lock.Locker {
			return newLocker(t, newClient(t, addr), WithPrefix(prefix))
		},
	})
}
