package lock

import "context"

// A Locker hands out leases on keys. Every backend's Locker keeps the contract
// documented here; lock/locktest checks it against a real server.
type Locker interface {
	// Acquire blocks until it holds key, ctx is done, or the wait limit
	// (WithWait) passes, and returns the held Lease. Errors: ErrNotAcquired
	// (held elsewhere: try-once failed or wait limit passed; a *HeldError
	// wrapping it when the backend told the holder's time left), ctx.Err() (as
	// is), an error wrapping ErrInvalid for bad input (no server is touched),
	// or the backend's error. It never returns a lease already past its
	// deadline: a lock whose taking was confirmed too late to hold (a link
	// slower than the TTL, a cluster electing a leader) is given back and
	// the attempt counts as failed.
	Acquire(ctx context.Context, key string, opts ...Option) (*Lease, error)
}
