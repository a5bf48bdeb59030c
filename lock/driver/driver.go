// Package driver is the contract between a storage backend and
// [lock.Manager], which turns a [Backend] into a [lock.Locker]: renewal,
// waiting, loss detection and release then behave alike on every backend.
// A backend implements Backend; each other interface here is an optional
// capability the Manager uses when the backend has it, named after what it
// lets the Manager do. Application code never needs this package: it uses
// the Lockers that backend packages (lock/redislock, lock/sqllock, ...)
// return.
//
// Errors a backend returns wrap the sentinels of package lock:
// [lock.ErrNotAcquired] when another owner holds a key, [lock.ErrNotHeld]
// when the caller's owner no longer does, [lock.ErrInvalid] for bad input.
// Any other error is transient: the Manager retries within the lease's
// local deadline.
//
// [lock.Manager]: https://pkg.go.dev/github.com/latchkey-go/latchkey/lock#Manager
// [lock.Locker]: https://pkg.go.dev/github.com/latchkey-go/latchkey/lock#Locker
// [lock.ErrNotAcquired]: https://pkg.go.dev/github.com/latchkey-go/latchkey/lock#ErrNotAcquired
// [lock.ErrNotHeld]: https://pkg.go.dev/github.com/latchkey-go/latchkey/lock#ErrNotHeld
// [lock.ErrInvalid]: https://pkg.go.dev/github.com/latchkey-go/latchkey/lock#ErrInvalid
package driver

import (
	"context"
	"time"
)

// Backend is what a storage backend implements. All methods must be safe
// for concurrent use. Owners are strings chosen by the Manager: 128 random
// bits, hex, then a space and the holder label if one was given
// (lock.WithHolder), at most 161 bytes. Backends store the owner with the
// lock (or the label, where the owner is not stored) so that lock.ParseOwner
// can tell who holds it.
type Backend interface {
	// TryAcquire makes one attempt to take key for owner for ttl. On success it
	// returns a fencing token strictly greater than every token it issued before
	// for key. If another owner holds key it returns an error wrapping
	// lock.ErrNotAcquired and, when known, how long the holder's lease has left,
	// which the Manager uses to time its next attempt: it tries again just
	// after that, never before. 0 means unknown (the Manager then backs off,
	// up to a second), so a backend reports at least 1 ms for a lease that
	// ends within the current millisecond.
	TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, holderTTL time.Duration, err error)

	// Renew extends key's lease to ttl from now if owner still holds it, and
	// returns an error wrapping lock.ErrNotHeld if not. Any other error is
	// treated as transient: the Manager retries until the lease's local
	// deadline.
	Renew(ctx context.Context, key, owner string, ttl time.Duration) error

	// Release deletes key's lock if owner holds it (compare-and-delete, atomic)
	// and wakes waiters. It returns an error wrapping lock.ErrNotHeld if owner
	// did not hold it.
	Release(ctx context.Context, key, owner string) error
}

// A BoundedAcquirer is a Backend that can take a lock on a lease it already
// has, which the server is known to keep for less than the TTL asked for
// (etcd: a kept lease confirmed a moment ago), instead of first refreshing
// it. The Manager calls TryAcquirePartial for renewed leases and TryAcquire
// for fixed-TTL ones, which must get their full TTL.
type BoundedAcquirer interface {
	// TryAcquirePartial is TryAcquire that also returns valid: how long,
	// counted from when the call began, the lock is certainly held, at most
	// ttl. The Manager gives the lease up at the call's start + valid -
	// drift (its allowance for clock rates over valid, as for a TTL) unless
	// a renewal confirms it before, and renews it at once when valid is
	// less than two thirds of ttl (a renewed lease is renewed when two
	// thirds are left), so a backend should return valid < 2*ttl/3 only if
	// it cannot do better.
	TryAcquirePartial(ctx context.Context, key, owner string, ttl time.Duration) (token uint64, valid, holderTTL time.Duration, err error)
}

// A BoundedRenewer is a Backend whose renewal can vouch for the lease for
// less than the TTL from when it was sent: where the server that answers is
// not the one that expires the lease (a ZooKeeper follower, whose answer
// proves only that the leader heard from the session a moment earlier).
// The Manager calls RenewPartial instead of Renew for renewals and
// extensions.
type BoundedRenewer interface {
	// RenewPartial is Renew that also returns valid: how long, counted
	// from when the call began, the lease is certainly held, at most ttl.
	// The Manager moves the lease's deadline to the call's start + valid -
	// drift, never earlier than it was, and renews again after the lesser
	// of a third of the TTL and half of valid.
	RenewPartial(ctx context.Context, key, owner string, ttl time.Duration) (valid time.Duration, err error)
}

// A ReleaseWatcher is a Backend that can tell waiters that a key may have
// been released (pub/sub, LISTEN/NOTIFY, watches), so they need not poll.
// Signals may be spurious; a missed signal costs only latency, because the
// Manager keeps a slow poll as a safety net.
type ReleaseWatcher interface {
	// WatchRelease starts watching key. The returned channel receives a value
	// (it may be buffered and coalesce signals) when key may be free. stop
	// releases the watch's resources; it is called exactly once.
	WatchRelease(ctx context.Context, key string) (wake <-chan struct{}, stop func(), err error)
}

// A WaiterWatcher is a ReleaseWatcher whose server may promise a released
// key to one of the Lockers waiting for it, in the order they began to wait
// (lock/sqllock on PostgreSQL): the Manager calls WatchReleaseFor for its
// waiting Acquire calls, passing the owner the Acquire tries the key as, and
// WatchRelease for those who only observe. Unlike a ServerQueue, the
// Manager still queues its own waiters.
type WaiterWatcher interface {
	ReleaseWatcher
	// WatchReleaseFor is WatchRelease for the Acquire that tries key as owner.
	WatchReleaseFor(ctx context.Context, key, owner string) (wake <-chan struct{}, stop func(), err error)
}

// A ServerQueue is a Backend that queues waiters on its server (etcd's
// revisions, ZooKeeper's sequential nodes): the Manager then calls
// WatchReleaseOwner (and not WatchRelease, if the backend has it too),
// passing the owner the waiting Acquire will try the key as, so the backend
// can tell that Acquire's TryAcquire calls apart from other callers' (to
// hand the lock to the longest waiter first, or to keep later arrivals from
// barging ahead of it). The Manager keeps no queue of its own for such a
// backend, which would fight the server's; for every other backend it
// queues its waiting Acquire calls per key and lets only the longest waiter
// attempt.
type ServerQueue interface {
	// WatchReleaseOwner is WatchRelease for the Acquire that tries key as owner.
	WatchReleaseOwner(ctx context.Context, key, owner string) (wake <-chan struct{}, stop func(), err error)
}

// A PipelinedReleaser is a Backend that can release a lock and let the
// next waiter of the releasing Manager attempt it in the same round trip
// (pipelining), instead of after the release's answer came back. When the
// Manager hands a release to its own longest waiter it calls ReleaseHandoff
// instead of Release, and that waiter needs no release hint; Release must
// hint every waiter, the releasing Manager's included.
type PipelinedReleaser interface {
	// ReleaseHandoff is Release that calls handoff once, as soon as an
	// attempt made from then on is sure to reach the server after the
	// release (at the latest when the release has completed, also when it
	// failed). Its release hint need not reach the releasing Manager.
	ReleaseHandoff(ctx context.Context, key, owner string, handoff func()) error
}

// A HandoverReleaser is a Backend that can release a lock and take it for the
// next owner in one step on its server, with a new fencing token: the
// Manager's longest waiter for the key then gets the lock without an
// attempt of its own, one round trip instead of two per hand-over.
type HandoverReleaser interface {
	// ReleaseHandover deletes owner's lock on key and, in the same step,
	// takes it for next with ttl, returning next's token (> 0) when it
	// did. It returns token 0 and a nil error when it released the lock but
	// kept it free for the waiters of other Managers, whom it hinted as
	// Release does, the releasing Manager's included. An error wrapping
	// lock.ErrNotHeld means owner did not hold the lock and nothing changed.
	// After any other error, the lock may have been taken for next.
	ReleaseHandover(ctx context.Context, key, owner, next string, ttl time.Duration) (token uint64, err error)
}

// Renewal is one lease to extend in a batch.
type Renewal struct {
	Key, Owner string
	TTL        time.Duration
}

// A BatchRenewer is a Backend that can renew many leases in one round trip
// (a pipeline, one statement). The Manager then renews all leases due at a
// tick together instead of one call per lease.
type BatchRenewer interface {
	// RenewBatch renews every lease in batch and returns one error per lease,
	// in order, with the meaning of Backend.Renew's error.
	RenewBatch(ctx context.Context, batch []Renewal) []error
}

// A Shared Backend lets several owners hold one key at once (a semaphore's
// permits). When a waiter of the Manager takes such a key, the next waiter
// in line attempts at once too, since more of the key may be free, instead
// of waiting for the next release: so a Manager's waiters fill every free
// permit in arrival order.
type Shared interface {
	// Shared reports whether key may have more than one holder.
	Shared(key string) bool
}

// A Relabeler is a Backend that can change the owner stored with a held
// lock without giving the lock up, so that a holder can change its holder
// label (lock.Lease.SetHolder) while it holds: a leader proclaiming a new
// value, say.
type Relabeler interface {
	// Relabel replaces owner by newOwner (never equal) on key's lock, in one
	// atomic step, if owner holds it; the lease keeps its expiry. It returns
	// an error wrapping lock.ErrNotHeld if owner does not hold key. newOwner
	// has owner's random id and another label. The Manager makes no renewal
	// of the lease while Relabel runs, and uses newOwner from then on once
	// Relabel returned nil.
	Relabel(ctx context.Context, key, owner, newOwner string) error
}

// A HolderWatcher is a Backend that can tell its watchers that a key's
// holder may have changed: the lock was taken, released, expired, broken or
// relabeled (lock.Lease.SetHolder). Signals may be spurious or coalesce; a
// watcher reads the lock again (inspection) to learn what changed.
type HolderWatcher interface {
	// WatchHolder starts watching key. The returned channel receives a value
	// (it may be buffered and coalesce signals) after every change of key's
	// holder from the moment WatchHolder returns. stop releases the watch's
	// resources; it is called exactly once.
	WatchHolder(ctx context.Context, key string) (changes <-chan struct{}, stop func(), err error)
}
