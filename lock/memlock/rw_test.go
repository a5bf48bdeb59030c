package memlock_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func TestRWConformance(t *testing.T) {
	// One process has one store: every Locker the suite asks for is it.
	l := memlock.NewRW()
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(*testing.T) *rwlock.Locker { return l },
	})
}
