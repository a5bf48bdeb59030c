package memlock_test

import (
	"sync"
	"testing"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

func TestConformance(t *testing.T) {
	var (
		mu  sync.Mutex
		cur = memlock.New()
	)
	locktest.Run(t, locktest.Harness{
		// One process has one store: every Locker the suite asks for is it.
		New: func(*testing.T) lock.Locker {
			mu.Lock()
			defer mu.Unlock()
			return cur
		},
		Revoke: func(_ *testing.T, key string) {
			mu.Lock()
			defer mu.Unlock()
			cur.Revoke(key)
		},
		// A restart is a new process: a new store, whose tokens must still
		// start above the old one's.
		Restart: func(*testing.T) {
			mu.Lock()
			defer mu.Unlock()
			cur = memlock.New()
		},
	})
}
