package memlock_test

import (
	"testing"

	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/semaphore"
	"github.com/latchkey-go/latchkey/semaphore/semaphoretest"
)

// TestSemaphoreConformance runs the semaphore suite on one in-process store:
// the Clients the suite asks for share it, as goroutines of one process do.
func TestSemaphoreConformance(t *testing.T) {
	ss := memlock.NewSemaphores()
	semaphoretest.Run(t, semaphoretest.Harness{
		New: func(t *testing.T) *semaphore.Client {
			c, err := semaphore.New(ss.Backend())
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		Revoke: func(t *testing.T, name string) { ss.Revoke(name) },
	})
}
