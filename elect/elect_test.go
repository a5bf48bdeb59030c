package elect_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

func TestMemory(t *testing.T) {
	shared := memlock.New()
	electtest.Run(t, electtest.Harness{
		// One Locker stands for one process; memlock coordinates only
		// goroutines of one process, so the candidates share it.
		New: func(t *testing.T) lock.Locker { return shared },
		// One Locker serves its waiting Acquire calls in arrival order.
		Queued: true,
	})
}
