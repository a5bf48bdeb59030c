package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errWait is what an attempt that found the key held returns when its
// Acquire may wait: the loop waits for its next chance.
var errWait = errors.New("lock: key held; waiting")

// An acquisition is one Acquire call in progress: it takes a lock a release
// handed it, else attempts if it is its turn, else waits for the next
// chance, until it holds the lock or gives up. close ends what it started.
type acquisition struct {
	m     *Manager
	ctx   context.Context
	key   string
	owner string
	cfg   config
	stats acquireStats

	place     *waiter         // its place in the Manager's queue for key, once it waits there
	turn      <-chan struct{} // place's turn, or nil (never ready) before it waits there
	behind    bool            // a longer waiter of this Manager attempts first
	wake      <-chan struct{} // the backend's release hint, or nil
	stopWatch func()          // ends the watch behind wake, or nil
	limit     *time.Timer     // ends a bounded wait, or nil
	poll      *time.Timer     // the next attempt's, once it waits
	again     bool            // attempt again at once, without waiting
	backoff   backoff
	holderTTL time.Duration // the holder's time left when last seen
	seen      time.Time     // when an attempt last found the key held
}

// acquire is Acquire, counting in stats; it returns what stats has counted.
func (m *Manager) acquire(ctx context.Context, key string, opts []Option, stats acquireStats) (*Lease, acquireStats, error) {
	cfg, err := newConfig(key, opts)
	if err != nil {
		return nil, stats, err
	}
	if err := ctx.Err(); err != nil {
		return nil, stats, err
	}
	a := acquisition{m: m, ctx: ctx, key: key, owner: m.newOwner(cfg.holder), cfg: cfg, stats: stats}
	a.begin()
	defer a.close()
	l, err := a.run()
	return l, a.stats, err
}

// run takes a hand-over, else attempts if it is a's turn, else waits, until
// a holds the lock or gives up.
func (a *acquisition) run() (*Lease, error) {
	for {
		if l := a.handedOver(); l != nil {
			return l, nil
		}
		a.behind = a.place != nil && a.m.waiters.behind(a.place)
		if !a.behind {
			if l, err := a.try(); !errors.Is(err, errWait) {
				return l, err
			}
		}
		if err := a.wait(); err != nil {
			return nil, err
		}
	}
}

// begin starts the acquisition. An Acquire that may wait watches before its
// first attempt where the server queues waiters (which must know that it
// waits), and queues at once behind this Manager's waiters for the key
// rather than barge in.
func (a *acquisition) begin() {
	if a.cfg.wait > 0 {
		a.limit = time.NewTimer(a.cfg.wait)
	}
	switch {
	case a.cfg.wait == 0:
	case !a.m.waiters.fifo:
		a.watch()
	case a.m.waiters.waiting(a.key) > 0:
		a.stats.found() // the wait for the holder starts now
		a.queue()
	}
}

// handedOver returns the lease of the lock a holder's release took for a,
// if one did.
func (a *acquisition) handedOver() *Lease {
	if a.place == nil {
		return nil
	}
	g := a.m.waiters.take(a.place)
	if g == nil {
		return nil
	}
	return a.m.hold(a.key, a.owner, g.token, a.cfg, g.start, a.cfg.ttl, a.stats.obs)
}

// try makes one attempt. It returns the lease, errWait if the key is held
// and a may wait, or the error that ends the Acquire.
func (a *acquisition) try() (*Lease, error) {
	start := time.Now()
	token, valid, holderTTL, err := a.m.tryAcquire(a.ctx, a.key, a.owner, a.cfg)
	if err == nil && pastDeadline(start, valid) {
		// The answer came after the lease's local deadline (a link slower
		// than the TTL, an etcd cluster electing a leader): the lock may
		// have passed on already. Give it back and count the attempt as
		// failed.
		a.m.abandon(a.ctx, a.key, a.owner, a.cfg.ttl)
		holderTTL, err = 0, ErrNotAcquired
	}
	a.stats.attempted(err)
	switch {
	case err == nil:
		if a.place != nil {
			a.m.waiters.acquired(a.place)
		}
		return a.m.hold(a.key, a.owner, token, a.cfg, start, valid, a.stats.obs), nil
	case !errors.Is(err, ErrNotAcquired):
		return nil, a.failed(err)
	}
	a.holderTTL, a.seen = holderTTL, time.Now()
	if a.cfg.wait == 0 {
		return nil, notAcquired(a.holderTTL, a.seen)
	}
	if a.place == nil {
		a.queue()
		// Where this Manager's queue decides, the attempt after the
		// watch is made at once (if first in line): a release between
		// the attempt that found the key held and the watch is not
		// missed.
		a.again = a.m.waiters.fifo
	}
	return nil, errWait
}

// failed is the error of an attempt that failed other than by finding the
// key held. If ctx ended, the attempt may still have taken the lock on the
// server: it is given back.
func (a *acquisition) failed(err error) error {
	if a.ctx.Err() != nil {
		a.m.abandon(a.ctx, a.key, a.owner, a.cfg.ttl)
		return a.ctx.Err()
	}
	return fmt.Errorf("lock: acquire: %w", err)
}

// queue takes a's place in the Manager's queue for key and, where this
// Manager's queue decides who attempts, starts watching for releases.
func (a *acquisition) queue() {
	a.place = a.m.waiters.join(a.key, a.owner, a.cfg.ttl)
	a.turn = a.place.turn
	if a.m.waiters.fifo {
		a.watch()
	}
}

// watch starts watching the backend for key's release, if it can and a
// does not watch yet. If watching fails a still acquires, by polling.
func (a *acquisition) watch() {
	if a.m.watch == nil || a.stopWatch != nil {
		return
	}
	if ch, stop, err := a.m.watch(a.ctx, a.key, a.owner); err == nil {
		a.wake, a.stopWatch = ch, stop
	}
}

// wait waits for a's next chance to attempt: its turn in the queue, the
// backend's release hint, or its poll, timed to the holder's lease when
// known. It returns the error that ends the Acquire: ctx's, or
// ErrNotAcquired once the wait allowed is over.
//
// A waiter behind another waits only for its turn, which the waiter ahead
// of it or a release hands it; its timer rechecks its place.
func (a *acquisition) wait() error {
	if a.again {
		a.again = false
		return nil
	}
	a.backoff.safetyNet = a.wake != nil
	holderTTL := a.holderTTL
	if a.behind {
		holderTTL = 0
	}
	d := a.backoff.next(holderTTL)
	if a.poll == nil {
		a.poll = time.NewTimer(d)
	} else {
		a.poll.Reset(d)
	}
	select {
	case <-a.ctx.Done():
		return a.ctx.Err()
	case <-timerC(a.limit):
		return notAcquired(a.holderTTL, a.seen)
	case <-a.wake:
		a.backoff.reset()
	case <-a.turn:
		a.backoff.reset()
	case <-a.poll.C:
	}
	return nil
}

// close ends a's watch and timers and leaves its place in the queue. A lock
// a release took for a as it gave up is given back.
func (a *acquisition) close() {
	if a.stopWatch != nil {
		a.stopWatch()
	}
	if a.limit != nil {
		a.limit.Stop()
	}
	if a.poll != nil {
		a.poll.Stop()
	}
	if a.place != nil && a.m.waiters.leave(a.place) != nil {
		a.m.abandon(a.ctx, a.key, a.owner, a.cfg.ttl)
	}
}

// timerC is t's channel, or nil (never ready) for no timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// acquireStats collects what an observed Acquire reports. Its methods do
// nothing when nobody observes (no Observer).
type acquireStats struct {
	obs       Observer
	begin     time.Time // when the Acquire was called
	attempts  int
	firstFail time.Time // when the first attempt found the key held
}

// observing returns the stats of an Acquire reported to o, which may be nil.
func observing(o Observer) acquireStats {
	if o == nil {
		return acquireStats{}
	}
	return acquireStats{obs: o, begin: time.Now()}
}

// found records that the Acquire found the key held now, unless it did
// before.
func (s *acquireStats) found() {
	if s.obs != nil && s.firstFail.IsZero() {
		s.firstFail = time.Now()
	}
}

// attempted counts an attempt that returned err.
func (s *acquireStats) attempted(err error) {
	if s.obs == nil {
		return
	}
	s.attempts++
	if errors.Is(err, ErrNotAcquired) {
		s.found()
	}
}

// report tells the observer how the Acquire of key made with ctx ended.
func (s *acquireStats) report(ctx context.Context, key string, l *Lease, err error) {
	if s.obs != nil {
		observeAcquire(ctx, s.obs, key, s.begin, s.firstFail, s.attempts, l, err)
	}
}
