package lock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A Lease is a held lock. It is created by Locker.Acquire and owned by the
// Manager that renews it; all its methods are safe for concurrent use.
type Lease struct {
	m     *Manager
	key   string
	token uint64
	ttl   time.Duration
	done  chan struct{}
	obs   *leaseObserver // nil when nobody observes
	fixed bool           // beside renewing, so the two share a word

	relabel sync.Mutex // serialises SetHolder calls

	// Guarded by m.mu.
	owner    string        // the owner the backend stores; SetHolder changes its label
	holder   string        // the label part of owner
	renewing bool          // a renewal (or a SetHolder) is in flight
	settled  chan struct{} // closed when the renewal in flight ends; nil if nobody waits
	err      error         // nil while held
	renewAt  time.Time     // next renewal (renewed leases only)
	deadline time.Time     // local deadline: last confirmed start + ttl - drift
	renewErr error         // the last failed renewal's error, for the loss report
	index    int           // position in m.heap, -1 when not scheduled
	onDone   []func(error)
}

// Key returns the key the lease holds.
func (l *Lease) Key() string { return l.key }

// Holder returns the holder label the lock was taken with (WithHolder), or
// the one SetHolder last stored, "" if none.
func (l *Lease) Holder() string {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.holder
}

// Token returns the lease's fencing token: strictly greater than every token
// the backend issued earlier for this key. Pass it to the resource you write
// to, which should refuse writes carrying a token lower than one it has seen.
func (l *Lease) Token() uint64 { return l.token }

// TTL returns the lease length the lock was taken with (WithTTL), not the
// time left: see TimeLeft.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Deadline returns the lease's local deadline: the moment, by this process's
// clock, after which it can no longer be sure it holds the lock unless a
// renewal (or Extend) is confirmed before. It is the start of the last
// confirmed acquisition or renewal plus the TTL, minus DriftMargin; the lock
// lives on the server at least until then. After Done is closed it is the
// deadline the lease had when it ended.
func (l *Lease) Deadline() time.Time {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.deadline
}

// TimeLeft returns how long the lease is certainly held from now: the time
// until Deadline, and 0 once Done is closed or the deadline has passed. A
// renewed lease's time left grows back with each renewal.
func (l *Lease) TimeLeft() time.Duration {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.err != nil {
		return 0
	}
	return max(time.Until(l.deadline), 0)
}

// Done returns a channel that is closed the moment the holder can no longer be
// sure it holds the lock: after Release, or when the lease is lost (expired,
// renewal refused, renewal not confirmed before the local deadline). Err says
// which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held; after Done is closed it returns
// ErrReleased or an error wrapping ErrLeaseLost.
func (l *Lease) Err() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.err
}

// releaseTimeout bounds the call Release makes to the backend, which does not
// end when Release's ctx does.
const releaseTimeout = 5 * time.Second

// Release stops renewal and then deletes the lock if it is still ours
// (compare-and-delete: it never deletes another holder's lock). It is safe to
// call more than once; later calls return nil. If the lease had been lost it
// returns an error wrapping ErrNotHeld and ErrLeaseLost. If the backend cannot
// be reached the error is returned and the lock expires after its TTL; renewal
// has stopped either way, so no orphan renewal keeps it alive.
//
// Release deletes the lock even when ctx is already cancelled or past its
// deadline, so `defer lease.Release(r.Context())` in a handler whose client
// went away frees the lock at once instead of leaving it for a whole TTL: it
// keeps ctx's values but not its cancellation or deadline, and gives the
// backend at most 5 s.
func (l *Lease) Release(ctx context.Context) error {
	m := l.m
	m.mu.Lock()
	if err := l.endedLocked(); err != nil {
		if err == ErrReleased {
			return nil
		}
		return err
	}
	cbs := m.finishLocked(l, ErrReleased)
	owner := l.owner
	m.mu.Unlock()
	runAll(cbs, ErrReleased)

	var begin time.Time
	if l.obs != nil {
		begin = time.Now()
	}
	rctx, cancel := detach(ctx, releaseTimeout)
	defer cancel()
	err := m.release(rctx, l.key, owner)
	if err != nil {
		err = fmt.Errorf("lock: release: %w", err)
	}
	if l.obs != nil {
		l.obs.o(Event{Kind: EventRelease, Key: l.key, Err: err, Duration: time.Since(begin), Held: begin.Sub(l.obs.start), Context: ctx, Lease: l})
	}
	return err
}

// endedLocked returns nil, with m.mu still held, if l is held. Otherwise it
// unlocks m.mu and returns ErrReleased if l was released, or an error
// wrapping ErrNotHeld and ErrLeaseLost if l was lost. A lease whose deadline
// passed before the scheduler noticed (the process was paused, say) is lost
// here and now, whatever the server says or cannot say; losing it also
// deletes the lock if it is still ours.
func (l *Lease) endedLocked() error {
	m := l.m
	if err := l.err; err != nil {
		m.mu.Unlock()
		if err == ErrReleased {
			return err
		}
		return notHeldError{err}
	}
	if !time.Now().Before(l.deadline) {
		err := l.expiredErr()
		cleanup := m.loseLocked(l, err)
		m.mu.Unlock()
		cleanup()
		return notHeldError{err}
	}
	return nil
}

// expiredErr is the error of a lease whose local deadline passed
// unconfirmed. Call with m.mu held.
func (l *Lease) expiredErr() error {
	switch {
	case l.fixed:
		return leaseLost("fixed TTL expired", nil)
	}
	// renewErr is the last renewal's error, nil if none came back.
	return leaseLost("renewal not confirmed before the local deadline", l.renewErr)
}

// leaseObserver is what an observed lease keeps for its events; kept apart so
// that unobserved leases pay one pointer.
type leaseObserver struct {
	o     Observer
	start time.Time // when the winning attempt was sent
}

// observeLoss reports the loss of l with err, if anybody observes.
func (l *Lease) observeLoss(err error) {
	if l.obs != nil {
		held := time.Since(l.obs.start)
		l.obs.o(Event{Kind: EventLoss, Key: l.key, Err: err, Duration: held, Held: held, Reason: lossReason(l.fixed, err),
			Context: context.Background(), Lease: l})
	}
}

// afterDone registers f to run with the lease's final error when the lease
// ends (on whichever goroutine ends it). If it has already ended, f runs now.
func (l *Lease) afterDone(f func(err error)) {
	l.m.mu.Lock()
	if err := l.err; err != nil {
		l.m.mu.Unlock()
		f(err)
		return
	}
	l.onDone = append(l.onDone, f)
	l.m.mu.Unlock()
}

func runAll(fs []func(error), err error) {
	for _, f := range fs {
		f(err)
	}
}

// leaseHeap orders scheduled leases by their next event.
type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].next().Before(h[j].next()) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	n := len(old)
	l := old[n-1]
	old[n-1] = nil
	l.index = -1
	*h = old[:n-1]
	return l
}

// next is the time of the lease's next event: a renewal, or its deadline
// when it is not renewed or a renewal is already in flight.
func (l *Lease) next() time.Time {
	if l.fixed || l.renewing || l.deadline.Before(l.renewAt) {
		return l.deadline
	}
	return l.renewAt
}
