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
		wg     sync.WaitGroup
		mu     sync.Mutex
		inside = map[string]bool{}
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				k := fmt.Sprint("k", rand.IntN(keys))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
				lease, err := l.Acquire(ctx, k, lock.WithTTL(30*time.Second))
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
					}
					continue
				}
				mu.Lock()
				if inside[k] {
					t.Errorf("two holders of %s", k)
				}
				inside[k] = true
				mu.Unlock()
				mu.Lock()
				inside[k] = false
				mu.Unlock()
				if err := lease.Release(ctxT(t)); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	// Clean-ups of abandoned attempts run in the background with a bound of a
	// second; give them that.
	deadline := time.Now().Add(3 * time.Second)
	for i := range keys {
		k := fmt.Sprint("k", i)
		for {
			lease, err := l.Acquire(ctxT(t), k, lock.WithWait(0))
			if err == nil {
				_ = lease.Release(ctxT(t))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still held after every caller gave up or released: %v", k, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
