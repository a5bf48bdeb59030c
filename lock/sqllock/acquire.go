package sqllock

import (
	"context"

	"github.com/latchkey-go/latchkey/lock"
)

// Acquire takes key and returns its Lease, with the contract of
// [lock.Locker]: it blocks until the lock is held, ctx is done, or the wait
// limit ([lock.WithWait]) passes; the lease is renewed every TTL/3 unless
// [lock.WithFixedTTL]; [lock.Lease.Done] closes the moment it may be lost.
// Here the lock lives in PostgreSQL, MySQL or SQLite: a release hands the
// lock to this Locker's next waiter in its own statement; other Lockers'
// waiters are woken by LISTEN/NOTIFY (PostgreSQL through pgx) or poll with
// capped backoff, and a failed try reports the holder's time left
// (*lock.HeldError).
//
// Errors: lock.ErrNotAcquired (held elsewhere), ctx.Err(), an error wrapping
// lock.ErrInvalid for bad input (no server is touched), or the server's error.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...lock.Option) (*lock.Lease, error) {
	return l.Manager.Acquire(ctx, key, opts...)
}

// SetObserver makes o the [lock.Observer] of the leases Acquire hands out from
// now on, for metrics or logs (package metrics has one); nil, the default,
// turns observation off at the cost of one atomic load per Acquire.
func (l *Locker) SetObserver(o lock.Observer) { l.Manager.SetObserver(o) }
