package memlock_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

func TestOperator(t *testing.T) {
	shared := memlock.New()
	locktest.RunOperator(t, locktest.Harness{New: func(*testing.T) lock.Locker { return shared }})
}
