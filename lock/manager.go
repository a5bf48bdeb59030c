package lock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/lock/driver"
)

// A Manager implements Locker on top of a driver.Backend: it validates input, waits
// for held keys, renews held leases in the background and detects their loss.
// Backends wrap one in their own Locker type. The zero value is not usable; use
// NewManager.
//
// A Manager keeps one timer, armed for its held leases' next event while it
// holds at least one, and no goroutine between events, so it needs no
// Close: taking and releasing a lease costs no goroutine start or wake-up.
type Manager struct {
	backend driver.Backend
	ownerID string                   // the first half of every owner id it makes (newOwner)
	batch   driver.BatchRenewer      // backend's, or nil
	partial driver.BoundedAcquirer   // backend's, or nil
	renewer driver.BoundedRenewer    // backend's, or nil
	handoff driver.PipelinedReleaser // backend's, or nil
	// handover is the backend's driver.HandoverReleaser, or nil.
	handover driver.HandoverReleaser
	// watch is the backend's WatchReleaseOwner, or its WatchRelease with
	// the owner ignored, or nil.
	watch func(ctx context.Context, key, owner string) (<-chan struct{}, func(), error)

	mu      sync.Mutex
	heap    leaseHeap   // guarded by mu
	timer   *time.Timer // runs tick at timerAt; created on first use; guarded by mu
	timerAt time.Time   // when timer fires; zero when not armed; guarded by mu

	waiters waiters // the waiting Acquire calls, per key

	obs atomic.Pointer[Observer] // nil: no observer (SetObserver)
}

var _ Locker = (*Manager)(nil)

// NewManager returns a Manager for b. It uses each optional capability of
// package driver that b also implements (BatchRenewer, BoundedAcquirer,
// BoundedRenewer, PipelinedReleaser, HandoverReleaser, ServerQueue,
// WaiterWatcher, ReleaseWatcher, Shared, Relabeler, HolderWatcher). Unless b is a
// driver.ServerQueue, whose server queues the waiters, the Manager serves
// its waiting Acquire calls on one key in arrival order. It returns an
// error wrapping ErrInvalid if b is nil.
func NewManager(b driver.Backend) (*Manager, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalid)
	}
	m := &Manager{backend: b, ownerID: newOwnerID()}
	m.batch, _ = b.(driver.BatchRenewer)
	m.partial, _ = b.(driver.BoundedAcquirer)
	m.renewer, _ = b.(driver.BoundedRenewer)
	m.handoff, _ = b.(driver.PipelinedReleaser)
	m.handover, _ = b.(driver.HandoverReleaser)
	_, serverQueue := b.(driver.ServerQueue)
	m.waiters.fifo = !serverQueue
	if s, ok := b.(driver.Shared); ok {
		m.waiters.shared = s.Shared
	}
	switch w := b.(type) {
	case driver.ServerQueue:
		m.watch = w.WatchReleaseOwner
	case driver.WaiterWatcher:
		m.watch = w.WatchReleaseFor
	case driver.ReleaseWatcher:
		m.watch = func(ctx context.Context, key, _ string) (<-chan struct{}, func(), error) {
			return w.WatchRelease(ctx, key)
		}
	}
	return m, nil
}

// Acquire implements Locker.
func (m *Manager) Acquire(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	l, stats, err := m.acquire(ctx, key, opts, observing(m.observer()))
	stats.report(ctx, key, l, err)
	return l, err
}

// tryAcquire makes one attempt and returns, on success, how long from its
// start the lock is certainly held: the full TTL unless the backend is a
// driver.BoundedAcquirer and the lease is renewed.
func (m *Manager) tryAcquire(ctx context.Context, key, owner string, cfg config) (token uint64, valid, holderTTL time.Duration, err error) {
	if m.partial == nil || cfg.fixed {
		token, holderTTL, err = m.backend.TryAcquire(ctx, key, owner, cfg.ttl)
		return token, cfg.ttl, holderTTL, err
	}
	token, valid, holderTTL, err = m.partial.TryAcquirePartial(ctx, key, owner, cfg.ttl)
	return token, min(max(valid, 0), cfg.ttl), holderTTL, err
}

// abandon deletes a lock that an attempt interrupted by ctx may have taken on
// the server, so it does not sit there until its TTL. The owner is fresh and
// compare-and-delete makes this safe.
func (m *Manager) abandon(ctx context.Context, key, owner string, ttl time.Duration) {
	rctx, cancel := detach(ctx, min(ttl, time.Second))
	defer cancel()
	_ = m.release(rctx, key, owner)
}

// release deletes owner's lock on key. Every other time (handoffsInARow)
// someone of this Manager waits for key, it also wakes the longest of them
// itself, without waiting for the backend's release hint, and in the
// release's own round trip if the backend is a driver.PipelinedReleaser; the other
// times the hint wakes it as it wakes other Managers' waiters.
func (m *Manager) release(ctx context.Context, key, owner string) error {
	if m.handover != nil {
		if w := m.waiters.head(key); w != nil {
			return m.releaseHandover(ctx, key, owner, w)
		}
	}
	if !m.waiters.handOff(key) {
		return m.backend.Release(ctx, key, owner)
	}
	wake := func() { m.waiters.wakeHead(key) }
	if m.handoff != nil {
		return m.handoff.ReleaseHandoff(ctx, key, owner, wake)
	}
	err := m.backend.Release(ctx, key, owner)
	wake()
	return err
}

// releaseHandover releases owner's lock on key and takes it for w, this
// Manager's longest waiter, in one step, unless the backend keeps it free
// for other Managers' waiters (then w attempts when the release hint
// comes, with even odds). A lock taken for a waiter that has given up
// meanwhile, or that may have been taken when the call failed, is released
// again, for the waiters behind it.
func (m *Manager) releaseHandover(ctx context.Context, key, owner string, w *waiter) error {
	start := time.Now()
	token, err := m.handover.ReleaseHandover(ctx, key, owner, w.owner, w.ttl)
	switch {
	case err == nil && token > 0:
		if !m.waiters.grant(w, &grant{token: token, start: start}) {
			_ = m.release(ctx, key, w.owner)
		}
		return nil
	case err == nil: // released, hinted to every waiter
		return nil
	case errors.Is(err, ErrNotHeld):
		m.waiters.wakeHead(key) // the lock is someone else's, or free
		return err
	default:
		// Not a hand-over again: w is still the head, and one from w to w
		// would fail the same way for as long as the error lasts.
		_ = m.backend.Release(ctx, key, w.owner)
		m.waiters.wakeHead(key)
		return err
	}
}

// detach returns a context with ctx's values but not its cancellation or
// deadline, done after timeout instead: for deleting a lock after the work
// that held it was cancelled, which must still happen.
func detach(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// pastDeadline reports whether a lock taken by an attempt begun at start and
// certainly held for valid from then is already past the deadline hold would
// give its lease.
func pastDeadline(start time.Time, valid time.Duration) bool {
	return !time.Now().Before(start.Add(valid - DriftMargin(valid)))
}

// hold starts a lease on a lock taken by an attempt begun at start and
// certainly held for valid (at most the TTL) from then: it is given up at
// start + valid - drift (the drift over valid), and renewed when two thirds
// of the TTL are left (at once if fewer are).
func (m *Manager) hold(key, owner string, token uint64, cfg config, start time.Time, valid time.Duration, o Observer) *Lease {
	l := &Lease{
		m: m, key: key, owner: owner, holder: cfg.holder, token: token, ttl: cfg.ttl, fixed: cfg.fixed,
		done:     make(chan struct{}),
		deadline: start.Add(valid - DriftMargin(valid)), // see pastDeadline
		renewAt:  start.Add(max(valid-2*cfg.ttl/3, 0)),
		index:    -1,
	}
	if o != nil {
		l.obs = &leaseObserver{o: o, start: start}
	}
	m.mu.Lock()
	heap.Push(&m.heap, l)
	m.scheduleLocked(l)
	m.mu.Unlock()
	return l
}

// scheduleLocked makes sure the timer fires by l's next event.
func (m *Manager) scheduleLocked(l *Lease) {
	if at := l.next(); m.timerAt.IsZero() || at.Before(m.timerAt) {
		m.armLocked(at)
	}
}

// kickLocked makes sure the timer fires by the earliest held lease's next
// event, after an event moved (closer or not).
func (m *Manager) kickLocked() {
	if len(m.heap) > 0 {
		m.armLocked(m.heap[0].next())
	}
}

// armLocked sets the timer to fire at at.
func (m *Manager) armLocked(at time.Time) {
	m.timerAt = at
	d := time.Until(at)
	if m.timer == nil {
		m.timer = time.AfterFunc(d, m.tick)
		return
	}
	m.timer.Reset(d)
}

// finishLocked ends l with err (ErrReleased or a lost-lease error): it stops
// scheduling it, records err, closes Done, and returns the callbacks to run
// once m.mu is released.
func (m *Manager) finishLocked(l *Lease, err error) []func(error) {
	if l.index >= 0 {
		heap.Remove(&m.heap, l.index)
		if len(m.heap) == 0 && !m.timerAt.IsZero() {
			// Nothing held: nothing to fire for, and nothing keeps the
			// Manager reachable.
			m.timer.Stop()
			m.timerAt = time.Time{}
		}
	}
	l.err = err
	l.settleLocked()
	close(l.done)
	cbs := l.onDone
	l.onDone = nil
	return cbs
}

// lose ends a lease that is no longer certainly ours and deletes the lock in
// case the server still has it, so others need not wait for its TTL.
func (m *Manager) loseLocked(l *Lease, err error) (cleanup func()) {
	cbs := m.finishLocked(l, err)
	owner := l.owner
	return func() {
		runAll(cbs, err)
		l.observeLoss(err)
		go func() {
			ctx, cancel := detach(context.Background(), min(l.ttl, releaseTimeout))
			defer cancel()
			_ = m.release(ctx, l.key, owner)
		}()
	}
}

// tick is the timer's function: it renews leases when due and declares
// them lost when their deadline passes unconfirmed, then arms the timer for
// the next event, if any lease is left. Ticks may overlap (a tick running
// while the timer is reset fires another); m.mu orders them, and a lease
// is taken for renewal once.
func (m *Manager) tick() {
	m.mu.Lock()
	m.timerAt = time.Time{} // this firing used it up
	var due []*Lease
	var after []func()
	for {
		now := time.Now()
		for len(m.heap) > 0 && !m.heap[0].next().After(now) {
			l := m.heap[0]
			if !now.Before(l.deadline) {
				after = append(after, m.loseLocked(l, l.expiredErr()))
				continue
			}
			l.renewing = true
			heap.Fix(&m.heap, 0)
			due = append(due, l)
		}
		if m.batch != nil && len(due) > 0 {
			// Renew early the leases due within a sixth of their TTL, so
			// leases taken at different times fall into step and each tick
			// renews them all in one batch.
			for len(m.heap) > 0 {
				l := m.heap[0]
				if l.fixed || l.renewing || l.next().After(now.Add(l.ttl/6)) {
					break
				}
				l.renewing = true
				heap.Fix(&m.heap, 0)
				due = append(due, l)
			}
		}
		if len(m.heap) == 0 || m.heap[0].next().After(time.Now()) {
			break
		}
	}
	if len(m.heap) > 0 {
		m.armLocked(m.heap[0].next())
	}
	m.mu.Unlock()

	for _, f := range after {
		f()
	}
	if len(due) > 0 {
		m.renew(due)
	}
}

// maxParallelRenewals bounds concurrent Renew calls for backends without
// batch renewal.
const maxParallelRenewals = 16

// renew renews due leases, in batches when the backend supports it.
func (m *Manager) renew(due []*Lease) {
	latest := due[0].deadline
	for _, l := range due[1:] {
		if l.deadline.After(latest) {
			latest = l.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	defer cancel()
	sent := time.Now()

	if m.batch != nil {
		reqs := make([]driver.Renewal, len(due))
		for i, l := range due {
			reqs[i] = driver.Renewal{Key: l.key, Owner: l.owner, TTL: l.ttl}
		}
		errs := m.batch.RenewBatch(ctx, reqs)
		for i, l := range due {
			var err error
			if i < len(errs) {
				err = errs[i]
			} else {
				err = errors.New("lock: backend returned too few renewal results")
			}
			m.renewed(l, sent, l.ttl, err)
		}
		return
	}
	sem := make(chan struct{}, maxParallelRenewals)
	var wg sync.WaitGroup
	for _, l := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			valid, err := m.renewOne(ctx, l.key, l.owner, l.ttl)
			m.renewed(l, sent, valid, err)
		}()
	}
	wg.Wait()
}

// renewOne renews one lease and returns, on success, how long from the
// call's start it is certainly held: the TTL unless the backend is a
// driver.BoundedRenewer.
func (m *Manager) renewOne(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	if m.renewer == nil {
		return ttl, m.backend.Renew(ctx, key, owner, ttl)
	}
	valid, err := m.renewer.RenewPartial(ctx, key, owner, ttl)
	return min(max(valid, 0), ttl), err
}

// confirmed moves l's deadline after a renewal sent at sent that vouches for
// valid (at most l's TTL): to sent + valid - drift, never earlier.
func (l *Lease) confirmed(sent time.Time, valid time.Duration) {
	if d := sent.Add(valid - DriftMargin(valid)); d.After(l.deadline) {
		l.deadline = d
	}
}

// renewed applies the outcome of a renewal sent at sent that vouched for
// valid.
func (m *Manager) renewed(l *Lease, sent time.Time, valid time.Duration, err error) {
	m.mu.Lock()
	if l.err != nil || !l.renewing { // released or lost meanwhile
		m.mu.Unlock()
		return
	}
	l.renewing = false
	l.settleLocked()
	var lost error
	switch {
	case err == nil:
		l.renewErr = nil
		l.confirmed(sent, valid)
		l.renewAt = sent.Add(min(l.ttl/3, valid/2))
	case errors.Is(err, ErrNotHeld):
		lost = leaseLost("renewal refused", err)
	default:
		// Transient: retry soon; the deadline still stands.
		l.renewErr = err
		l.renewAt = time.Now().Add(min(max(l.ttl/10, 5*time.Millisecond), time.Second))
	}
	if lost != nil {
		cleanup := m.finishLocked(l, lost)
		m.mu.Unlock()
		runAll(cleanup, lost)
	} else {
		heap.Fix(&m.heap, l.index)
		m.scheduleLocked(l)
		m.mu.Unlock()
	}
	if l.obs != nil {
		l.obs.o(Event{Kind: EventRenew, Key: l.key, Err: err, Duration: time.Since(sent), Context: context.Background(), Lease: l})
		if lost != nil {
			l.observeLoss(lost)
		}
	}
}

// backoff times the attempts of a waiting Acquire.
type backoff struct {
	safetyNet bool // a release watcher wakes us; polling is only a safety net
	n         int
}

func (b *backoff) reset() { b.n = 0 }

// next returns how long to wait before the next attempt, given the holder's
// remaining lease (0 if unknown).
func (b *backoff) next(holderTTL time.Duration) time.Duration {
	base, ceil := 2*time.Millisecond, 10*time.Millisecond
	if b.safetyNet {
		base, ceil = 50*time.Millisecond, time.Second
	}
	d := min(base<<min(b.n, 10), ceil)
	b.n++
	// Jitter of up to 25% keeps waiters of one key from attempting in lockstep.
	d -= time.Duration(rand.Int64N(int64(d/4) + 1))
	if holderTTL > 0 && holderTTL < d {
		// The holder's lease ends first: attempt right after it, so a
		// waiter for a crashed holder gets the lock within a millisecond
		// or two of its expiry. Jitter goes only upward here: an attempt
		// before the end would find the lock still held.
		d = holderTTL + time.Millisecond + time.Duration(rand.Int64N(int64(time.Millisecond)))
	}
	return d
}
