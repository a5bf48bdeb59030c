package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestCancelledAttemptsLeaveNoLock has many goroutines of one Locker contend
// for a few keys with contexts cancelled at random moments, often while
// their attempt is queued or in flight in a pipeline. An attempt that took the
// lock on the server after its caller gave up must be cleaned up, so at the
// end every key is free and exclusion was never broken.
func TestCancelledAttemptsLeaveNoLock(t *testing.T) {
	t.Parallel()
	l := newLocker(t, newClient(t, testsvc.RedisAddr(t)), WithPrefix(testsvc.KeyPrefix(t)))
	const goroutines, rounds, keys = 24, 40, 3
	var (
		wg      sync.WaitGroup
		holders = exclusion{inside: map[string]bool{}}
	)
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				holders.attemptCancelled(t, l, fmt.Sprint("k", rand.IntN(keys)))
			}
		})
	}
	wg.Wait()
	// Clean-ups of abandoned attempts run in the background with a bound of a
	// second; give them that.
	deadline := time.Now().Add(3 * time.Second)
	for i := range keys {
		waitFree(t, l, fmt.Sprint("k", i), deadline)
	}
}

// exclusion fails a test when two callers hold one key at once.
type exclusion struct {
	mu     sync.Mutex
	inside map[string]bool // guarded by mu
}

// attemptCancelled tries k through l with a context that ends within 3 ms,
// often while the attempt is queued or in flight; if it got the lock, it
// holds it alone and releases it.
func (e *exclusion) attemptCancelled(t *testing.T, l *Locker, k string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
	lease, err := l.Acquire(ctx, k, lock.WithTTL(30*time.Second))
	cancel()
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire: %v", err)
		}
		return
	}
	e.mu.Lock()
	if e.inside[k] {
		t.Errorf("two holders of %s", k)
	}
	e.inside[k] = true
	e.mu.Unlock()
	e.mu.Lock()
	e.inside[k] = false
	e.mu.Unlock()
	if err := lease.Release(ctxT(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// waitFree returns once l can take k, or fails t if it cannot by deadline.
func waitFree(t *testing.T, l *Locker, k string, deadline time.Time) {
	t.Helper()
	for {
		lease, err := l.Acquire(ctxT(t), k, lock.WithWait(0))
		if err == nil {
			_ = lease.Release(ctxT(t))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still held after every caller gave up or released: %v", k, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
