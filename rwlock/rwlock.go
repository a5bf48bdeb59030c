package rwlock

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// IntentTTL is how long a waiting writer's record, which keeps new readers
// out, outlives its last attempt. A waiting writer attempts at least once a
// second (the Manager's safety-net poll), so the record lives as long as it
// waits; a writer that dies while it waits keeps readers out this long.
const IntentTTL = 3 * time.Second

// Mode says whether a holder shares its name (Read) or holds it alone
// (Write).
type Mode int

// The modes.
const (
	Read  Mode = 1 // shared: readers hold a name together
	Write Mode = 2 // exclusive: a writer holds a name alone
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("rwlock.Mode(%d)", int(m))
}

// A Backend keeps read-write locks on a server. Names and owners are those
// of [driver.Backend] (owners are chosen by lock's Manager, new for every
// Acquire); time is the server's. All methods must be safe for concurrent
// use.
type Backend interface {
	// TryAcquire makes one attempt to take name for owner in mode for ttl.
	// A reader gets in unless a writer holds name or a writer's intent
	// (below) lives; a writer gets in unless anyone holds name. On success
	// it returns the name's next fencing token, greater than every token
	// issued for name before in either mode, and a writer's own intent
	// ends. Otherwise it returns an error wrapping lock.ErrNotAcquired and,
	// as driver.Backend's TryAcquire, how long the holders that keep owner
	// out have left, or 0 for unknown. intent (writers only) means the
	// writer waits: a failed attempt then records, or renews, its intent
	// for IntentTTL from now, and no reader gets in while it lives.
	TryAcquire(ctx context.Context, name, owner string, mode Mode, ttl time.Duration, intent bool) (token uint64, holderTTL time.Duration, err error)

	// Renew extends owner's hold on name in mode to ttl from now, or
	// returns an error wrapping lock.ErrNotHeld if owner does not hold it.
	// Any other error is transient.
	Renew(ctx context.Context, name, owner string, mode Mode, ttl time.Duration) error

	// Release ends owner's hold on name in mode (compare-and-delete) and
	// wakes the watchers of name when that may let someone in: after a
	// writer, or after the last reader. It returns an error wrapping
	// lock.ErrNotHeld if owner did not hold name in mode.
	Release(ctx context.Context, name, owner string, mode Mode) error

	// Withdraw ends the intent of writer owner on name, if it has one, and
	// wakes the watchers of name.
	Withdraw(ctx context.Context, name, owner string) error
}

// A Bounded is a Backend whose holds are certain for less than their TTL
// from the call that confirmed them, as a driver.BoundedRenewer's leases are
// (ZooKeeper behind a follower).
type Bounded interface {
	// Certain returns how long from sent a hold of ttl that a call sent
	// then confirmed is certainly held, at most ttl.
	Certain(sent time.Time, ttl time.Duration) time.Duration
}

// A ReleaseWatcher is a Backend that can tell waiters that a name may have
// become free for them (pub/sub, LISTEN/NOTIFY, watches), so they need not
// poll. Without one, waiters poll every few milliseconds.
type ReleaseWatcher interface {
	// WatchRelease is driver.ReleaseWatcher's WatchRelease for name: the
	// channel receives a value when name may have become free for someone
	// (a release, a withdrawn intent). Signals may be spurious; a missed
	// one costs only latency (the Manager keeps a slow poll).
	WatchRelease(ctx context.Context, name string) (wake <-chan struct{}, stop func(), err error)
}

// A Locker hands out read and write leases on names. Create it with New;
// its methods are safe for concurrent use. If its Backend has a Close
// method, Close calls it.
type Locker struct {
	b      Backend
	r, w   *lock.Manager
	closer io.Closer // b's, or nil
}

// New returns a Locker on b, which may also be a ReleaseWatcher. It returns an error wrapping lock.ErrInvalid
// if b is nil and touches no server.
func New(b Backend) (*Locker, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: rwlock: nil backend", lock.ErrInvalid)
	}
	r, err := lock.NewManager(newView(b, Read))
	if err != nil {
		return nil, err
	}
	w, err := lock.NewManager(newView(b, Write))
	if err != nil {
		return nil, err
	}
	l := &Locker{b: b, r: r, w: w}
	l.closer, _ = b.(io.Closer)
	return l, nil
}

// RLock takes name shared, with other readers, and returns the lease, with
// the contract of [lock.Locker]'s Acquire and its options. It waits while a
// writer holds name or waits for it. Errors: lock.ErrNotAcquired (a
// try-once attempt failed or the wait limit passed), ctx.Err(), an error
// wrapping lock.ErrInvalid for bad input (no server is touched), or the
// backend's error.
func (l *Locker) RLock(ctx context.Context, name string, opts ...lock.Option) (*lock.Lease, error) {
	return l.r.Acquire(ctx, name, opts...)
}

// Lock takes name exclusive, alone, and returns the lease, with the contract
// of [lock.Locker]'s Acquire and its options. While it waits, no new reader
// gets in. Its token fences: it is greater than every token issued for name
// before. Errors are those of RLock.
func (l *Locker) Lock(ctx context.Context, name string, opts ...lock.Option) (*lock.Lease, error) {
	return l.w.Acquire(ctx, name, opts...)
}

// Readers returns l's shared side as a lock.Locker, whose Acquire is RLock:
// for lock.Do, and for code written against lock.Locker.
func (l *Locker) Readers() lock.Locker { return l.r }

// Writers returns l's exclusive side as a lock.Locker, whose Acquire is
// Lock.
func (l *Locker) Writers() lock.Locker { return l.w }

// SetObserver makes o the [lock.Observer] of the leases of both modes from
// now on; nil, the default, turns observation off.
func (l *Locker) SetObserver(o lock.Observer) {
	l.r.SetObserver(o)
	l.w.SetObserver(o)
}

// Close closes the backend if it has a Close method (a subscription, a
// connection it opened). It does not release held leases.
func (l *Locker) Close() error {
	if l.closer == nil {
		return nil
	}
	return l.closer.Close()
}
