package redislock

import (
	"context"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// InspectLock implements lock.Inspector with one script. Redis records no
// acquisition time (AcquiredAt is zero) and cannot count waiters: Waiters
// is lock.Unknown, and Waiting means an attempt failed on the key within
// the last 10 s.
func (l *Locker) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	return l.n.InspectLock(ctx, key)
}

// ListLocks implements lock.Lister with SCAN (MATCH, COUNT; never KEYS), on
// a Redis Cluster one master after the other. A page ends at limit locks,
// after 32 SCAN calls or after a second, whichever comes first. As with
// SCAN, a lock held throughout a listing is listed, perhaps twice; one
// taken or let go meanwhile may or may not be.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	return l.n.ListLocks(ctx, prefix, limit, cursor)
}

// BreakLock implements lock.Breaker: one script deletes the lock and
// publishes the release, keeping the fencing counter. The release is
// published as nobody's, so this Locker's own waiters hear it too.
func (l *Locker) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	return l.n.BreakLock(ctx, key)
}
