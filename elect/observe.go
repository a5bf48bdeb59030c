package elect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// holderWatcher is a Locker whose Manager watches a lock's holder
// (lock.Manager.WatchHolder, promoted to every backend's Locker).
type holderWatcher interface {
	WatchHolder(ctx context.Context, key string) (changes <-chan struct{}, stop func(), complete bool, err error)
}

// Observe follows the election: the returned channel delivers the current
// leader first (Elected false if nobody leads), then every change the
// observer sees, in order: a new term, a new value proclaimed, no leader.
// It is closed when ctx is done. Only what the backend reported is
// delivered, so no phantom leader appears, and terms only move forward: a
// read showing an older term than one delivered is dropped.
//
// An observer never shows a leader through an outage: it confirms the
// leader at least every third of the TTL, and when it has not managed to
// before the leader's lease, as last read, could have ended (or for a TTL
// while nobody led) — the backend is down or out of reach — it delivers a
// Leader with Unknown set and Err saying why, once, and then the leader
// again as soon as a read succeeds (even if nothing changed meanwhile).
//
// Where the backend signals every change (etcd and ZooKeeper watches,
// memory) an idle observer costs its watch and that confirmation. Elsewhere
// (Redis, Redlock, SQL) it reads the leader again whenever the backend
// hints at a change (Redis pub/sub and PostgreSQL LISTEN/NOTIFY tell of
// proclaims, and of releases while candidates wait) and at least every poll
// interval (WithPollInterval, 1 s by default), which bounds how
// late a change is seen; changes closer together than that may coalesce
// into the last of them. A failed read is retried after the poll interval
// (or the third of the TTL, if shorter).
//
// Errors, before anything is delivered: ErrUnsupported if the Locker
// cannot tell who holds a lock, or the watch's error.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	in, ok := e.locker.(lock.Inspector)
	if !ok {
		return nil, fmt.Errorf("%w: elect: observe", ErrUnsupported)
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		changes  <-chan struct{}
		stop     = func() {}
		complete bool
	)
	if w, ok := e.locker.(holderWatcher); ok {
		// Watch before the first read, so no change in between is missed.
		ch, s, c, err := w.WatchHolder(ctx, e.name)
		switch {
		case err == nil:
			changes, stop, complete = ch, s, c
		case !errors.Is(err, lock.ErrUnsupported):
			cancel()
			return nil, fmt.Errorf("elect: observe: %w", err)
		}
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		defer cancel()
		defer stop()
		o := observer{e: e, in: in, out: out, poll: !complete, confirmed: time.Now().Add(e.ttl)}
		o.run(ctx, changes)
	}()
	return out, nil
}

// observer is one Observe call's state.
type observer struct {
	e    *Election
	in   lock.Inspector
	out  chan<- Leader
	poll bool // the watch, if any, misses changes: read every poll interval too

	last      Leader
	sent      bool
	highest   uint64    // the highest token delivered
	confirmed time.Time // until when the last read vouches for what it showed
}

func (o *observer) run(ctx context.Context, changes <-chan struct{}) {
	// Even a watch that tells every change cannot tell that the backend
	// went away: the leader is confirmed at least every third of the TTL.
	confirm := max(o.e.ttl/3, time.Millisecond)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-timer.C:
		}
		next := confirm
		if o.poll {
			next = min(o.e.poll, confirm)
		}
		if err := o.read(ctx, confirm); err != nil {
			o.failed(ctx, err)
		}
		timer.Stop()
		timer.Reset(next)
	}
}

// failed notes a failed read: once what the last read showed may no longer
// hold, it delivers, once, that who leads is unknown.
func (o *observer) failed(ctx context.Context, err error) {
	if ctx.Err() != nil || (o.sent && o.last.Unknown) || time.Now().Before(o.confirmed) {
		return
	}
	o.deliver(ctx, Leader{Unknown: true, Err: fmt.Errorf("elect: who leads %q is unknown: %w", o.e.name, err)})
}

// read reads the leader, within timeout, and delivers it if it changed.
func (o *observer) read(ctx context.Context, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, max(timeout, 100*time.Millisecond))
	info, err := o.in.InspectLock(rctx, o.e.name)
	cancel()
	if err != nil {
		return err
	}
	// A leader's term may end when its lease does, unless renewed, which
	// the next read must see; nobody leading may change within a TTL.
	o.confirmed = time.Now().Add(o.e.ttl)
	if info.Held && info.TimeLeft > 0 {
		o.confirmed = time.Now().Add(min(info.TimeLeft, o.e.ttl))
	}
	var l Leader
	if info.Held {
		l = leaderOf(info)
	}
	switch {
	case o.sent && sameTerm(l, o.last):
		return nil
	case l.Elected && l.Token != 0 && l.Token < o.highest:
		return nil // a read older than what was delivered
	}
	if l.Elected && l.Since.IsZero() {
		l.Since = time.Now()
		if o.last.Elected && o.last.Token == l.Token {
			l.Since = o.last.Since // the same term, proclaiming
		}
	}
	o.deliver(ctx, l)
	return nil
}

// deliver sends l, unless ctx ends first.
func (o *observer) deliver(ctx context.Context, l Leader) {
	select {
	case o.out <- l:
		o.last, o.sent = l, true
		o.highest = max(o.highest, l.Token)
	case <-ctx.Done():
	}
}
