package lock

import (
	"fmt"
	"time"
)

// A HeldError is what Acquire returns when the lock is held by another
// owner and the backend told how long that holder's lease has left: a
// try-once attempt (WithWait(0)) failed, or the wait limit passed. It wraps
// ErrNotAcquired, so errors.Is(err, ErrNotAcquired) holds; errors.As gives
// the time left, for an HTTP handler's Retry-After. Backends that queue
// waiters (etcd, ZooKeeper) do not tell it, and Acquire returns
// ErrNotAcquired itself.
type HeldError struct {
	// TimeLeft is how long the holder's lease had left when Acquire last
	// asked, less the time since: at least 1 ms. A holder that renews its
	// lease keeps it longer; one that releases it frees it sooner.
	TimeLeft time.Duration
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%v: the holder's lease has %v left", ErrNotAcquired, e.TimeLeft.Round(time.Millisecond))
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }

// notAcquired returns the error of an Acquire that gave up on a held lock:
// a *HeldError if the last attempt, at seen, was told the holder's time left
// (holderTTL > 0), else ErrNotAcquired.
func notAcquired(holderTTL time.Duration, seen time.Time) error {
	if holderTTL <= 0 {
		return ErrNotAcquired
	}
	return &HeldError{TimeLeft: max(holderTTL-time.Since(seen), time.Millisecond)}
}
