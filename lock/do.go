package lock

import (
	"context"
	"errors"
	"fmt"
)

// Do acquires key on l, runs fn with a context that is cancelled the moment the
// lease is lost (its cause then wraps ErrLeaseLost), and releases the lock
// afterwards, also when fn panics or ctx is done (see Lease.Release).
//
// Its outcomes, told apart with errors.Is and errors.As:
//   - nil: fn succeeded under the lease, and the lock was released.
//   - Acquire's error if the lock was not taken (ErrNotAcquired, a context
//     error, ErrInvalid, a backend error); fn did not run.
//   - a *LostError (wrapping ErrLeaseLost) if the lease was lost before Do
//     ended: fn's work may have overlapped another holder's. Its Err is fn's
//     error, nil if fn succeeded: then the work's effect happened, and the
//     caller should report success and alert, not retry it.
//   - fn's error, if fn failed under a lease that was not lost.
//
// If the release itself fails (the server cannot be reached; the lock then
// expires after its TTL) its error is joined to fn's.
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context, lease *Lease) error, opts ...Option) (err error) {
	if l == nil {
		return fmt.Errorf("%w: nil Locker", ErrInvalid)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalid)
	}
	lease, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	lease.afterDone(func(lerr error) {
		if lerr != ErrReleased {
			cancel(lerr)
		}
	})
	defer func() {
		cancel(nil)
		rerr := lease.Release(ctx)
		switch {
		case rerr == nil:
		case errors.Is(rerr, ErrNotHeld):
			err = &LostError{Err: err, Lost: lease.Err()}
		default:
			err = errors.Join(err, rerr)
		}
	}()
	return fn(fctx, lease)
}
