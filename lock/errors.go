package lock

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test for them with errors.Is; context errors
// (context.Canceled, context.DeadlineExceeded) are returned as they are and stay
// visible to errors.Is too.
var (
	// ErrNotAcquired means the lock is held by someone else: a try-once attempt
	// (WithWait(0)) failed or the wait limit passed.
	ErrNotAcquired = errors.New("lock: not acquired")

	// ErrLeaseLost means the holder can no longer be sure it holds the lock: the
	// lease expired, renewal was refused, or renewal was not confirmed before the
	// local deadline. Work done under the lease after this point is unprotected.
	ErrLeaseLost = errors.New("lock: lease lost")

	// ErrNotHeld means a release or renewal found the lock no longer ours: it
	// expired or was taken away. Release returns it when the lease was lost.
	ErrNotHeld = errors.New("lock: not held")

	// ErrReleased is what Lease.Err reports after a successful Release.
	ErrReleased = errors.New("lock: lease released")

	// ErrOtherMode means the name is held in another mode: one name is one
	// resource on a backend, so a lock, a read-write lock and a semaphore of
	// one name exclude each other, and an acquisition in one mode while
	// another holds the name is refused at once, whatever its wait (two
	// hosts running one job with different flags must not both run it, nor
	// wait for each other unseen). The error is a *ModeError.
	ErrOtherMode = errors.New("lock: held in another mode")

	// ErrInvalid wraps every bad-input error (empty key, TTL out of range, nil
	// client). Such calls change nothing and touch no server.
	ErrInvalid = errors.New("lock: invalid argument")
)

// The modes a name can be held in, as ModeError.HeldAs names them.
const (
	ModeLock      = "lock"            // a plain lock, or an election's term
	ModeReadWrite = "read-write lock" // readers or a writer
	ModeSemaphore = "semaphore"       // permits
)

// A ModeError is the error of an acquisition refused because its name is
// held in another mode. It wraps ErrOtherMode.
type ModeError struct {
	Key     string // the name
	HeldAs  string // ModeLock, ModeReadWrite or ModeSemaphore
	Permits int    // a semaphore's N, when HeldAs is ModeSemaphore and the backend said it
}

// Error says how the key is held and what to do.
func (e *ModeError) Error() string {
	held := "a " + e.HeldAs
	if e.HeldAs == ModeSemaphore && e.Permits > 0 {
		held += fmt.Sprintf(" of %d permits", e.Permits)
	}
	return fmt.Sprintf("lock: %q is held as %s; one name is one resource: use the mode it is held in, or another name", e.Key, held)
}

// Unwrap returns ErrOtherMode.
func (e *ModeError) Unwrap() error { return ErrOtherMode }
