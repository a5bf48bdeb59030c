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
// It returns Acquire's error if the lock was not taken (ErrNotAcquired, a
// context error, ErrInvalid), else fn's error. If the lease was lost while fn
// ran, the result also wraps ErrLeaseLost, even when fn returned nil: the work
// may have overlapped another holder's, and the caller must know.
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
		if rerr := lease.Release(ctx); rerr != nil {
			if errors.Is(rerr, ErrNotHeld) {
				rerr = lease.Err()
			}
			err = errors.Join(err, rerr)
		}
	}()
	return fn(fctx, lease)
}
