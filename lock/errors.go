package lock

import "errors"

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

	// ErrInvalid wraps every bad-input error (empty key, TTL out of range, nil
	// client). Such calls change nothing and touch no server.
	ErrInvalid = errors.New("lock: invalid argument")
)
