package redislock

import (
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func TestRWConformance(t *testing.T) {
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	admin := newClient(t, addr)
	t.Cleanup(func() { deletePrefix(t, admin, prefix) })
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(t *testing.T) *rwlock.Locker {
			l, err := NewRW(newClient(t, addr), WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}
