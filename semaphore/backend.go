package semaphore

import (
	"context"
	"time"
)

// A Request is what one acquisition asks a backend for: Count of Name's
// Permits. The Client checks it before a backend sees it: the name is
// non-empty and at most MaxNameLen bytes (any bytes, '/' included), and
// 1 <= Count <= Permits <= MaxPermits.
type Request struct {
	Name    string
	Permits int // N, the permit count every party agrees on
	Count   int // how many permits this acquisition takes, 1 to Permits
}

// A Backend keeps the permits of semaphores on a server; New turns it into
// a Client, whose lock.Manager brings renewal (in batches where the backend
// is a BatchRenewer), loss detection, waiting and release hints. Owners are
// those of driver.Backend: chosen by the Manager, new for every Acquire,
// stored with the permits so that lock.ParseOwner can tell the holder's
// label. Time is the server's. Errors wrap the sentinels of package lock as
// driver.Backend's do; any other error is transient. All methods must be
// safe for concurrent use.
type Backend interface {
	// TryAcquire makes one attempt to take r.Count of r.Name's permits for
	// owner for ttl. On success it returns a fencing token strictly greater
	// than every token issued before for r.Name, for any count. If too few
	// permits are free it returns an error wrapping lock.ErrNotAcquired
	// and, as driver.Backend's TryAcquire, how long the earliest holder's
	// lease has left, or 0 for unknown. If the holders took their permits
	// with another N it returns a *MismatchError and takes nothing.
	TryAcquire(ctx context.Context, r Request, owner string, ttl time.Duration) (token uint64, holderTTL time.Duration, err error)

	// Renew extends owner's permits of r.Name to ttl from now, or returns
	// an error wrapping lock.ErrNotHeld if owner no longer holds them.
	Renew(ctx context.Context, r Request, owner string, ttl time.Duration) error

	// Release gives owner's permits of r.Name back (compare-and-delete)
	// and wakes the waiters of r.Name. It returns an error wrapping
	// lock.ErrNotHeld if owner did not hold them.
	Release(ctx context.Context, r Request, owner string) error
}

// A ReleaseWatcher is a Backend that can tell waiters that a semaphore's
// permits may have been released (pub/sub, LISTEN/NOTIFY), so they need not
// poll. Without one, or a ServerQueue, waiters poll every few milliseconds.
type ReleaseWatcher interface {
	// WatchRelease is driver.ReleaseWatcher's WatchRelease for name: a
	// release of any count of name's permits signals the channel. Signals
	// may be spurious; a missed one costs only latency.
	WatchRelease(ctx context.Context, name string) (wake <-chan struct{}, stop func(), err error)
}

// A ServerQueue is a Backend that queues waiters on its server (etcd's
// revisions, ZooKeeper's lock), as a driver.ServerQueue does: the Client then
// keeps no queue of its own and calls WatchReleaseOwner before the first
// attempt of an Acquire that may wait.
type ServerQueue interface {
	// WatchReleaseOwner is driver.ServerQueue's WatchReleaseOwner for the
	// Acquire that asks for r as owner.
	WatchReleaseOwner(ctx context.Context, r Request, owner string) (wake <-chan struct{}, stop func(), err error)
}

// Renewal is one permit to extend in a batch.
type Renewal struct {
	Request
	Owner string
	TTL   time.Duration
}

// A BatchRenewer is a Backend that can renew many permits in one round trip
// (a pipeline, one statement), as a driver.BatchRenewer does.
type BatchRenewer interface {
	// RenewBatch renews every permit in batch and returns one error per
	// permit, in order, with the meaning of Backend.Renew's error.
	RenewBatch(ctx context.Context, batch []Renewal) []error
}

// A PipelinedReleaser is a Backend that can release permits and let the
// Client's next waiter attempt in the same round trip, as a
// driver.PipelinedReleaser does.
type PipelinedReleaser interface {
	// ReleaseHandoff is Release that calls handoff once, as soon as an
	// attempt made from then on is sure to reach the server after the
	// release (at the latest when the release has completed, also when it
	// failed). Its release hint need not reach this Client's waiters.
	ReleaseHandoff(ctx context.Context, r Request, owner string, handoff func()) error
}

// A Bounded is a Backend whose permits are certain for less than their TTL
// from the call that confirmed them, as a driver.BoundedRenewer's leases are
// (ZooKeeper behind a follower).
type Bounded interface {
	// Certain returns how long from sent a permit of ttl that a call sent
	// then confirmed is certainly held, at most ttl.
	Certain(sent time.Time, ttl time.Duration) time.Duration
}
