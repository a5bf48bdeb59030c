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
// Where the backend signals every change (etcd and ZooKeeper watches,
// memory) an idle observer costs nothing beyond its watch. Elsewhere
// (Redis, Redlock, SQL) it reads the leader again whenever the backend
// hints at a change (Redis pub/sub and PostgreSQL LISTEN/NOTIFY tell of
// proclaims, and of releases while candidates wait) and at least every poll
// interval (WithPollInterval, 1 s by default), which bounds how
// late a change is seen; changes closer together than that may coalesce
// into the last of them. A failed read is retried after the poll interval.
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
		o := observer{e: e, in: in, out: out, poll: !complete}
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

	last Leader
	sent bool
}

func (o *observer) run(ctx context.Context, changes <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-timer.C:
		}
		next := o.e.poll
		if err := o.read(ctx); err == nil && !o.poll {
			next = -1 // the watch tells every change
		}
		timer.Stop()
		if next > 0 {
			timer.Reset(next)
		}
	}
}

// read reads the leader and delivers it if it changed.
func (o *observer) read(ctx context.Context) error {
	info, err := o.in.InspectLock(ctx, o.e.name)
	if err != nil {
		return err
	}
	var l Leader
	if info.Held {
		l = leaderOf(info)
	}
	switch {
	case o.sent && sameTerm(l, o.last):
		return nil
	case o.sent && l.Elected && o.last.Elected && l.Token != 0 && l.Token < o.last.Token:
		return nil // a read older than what was delivered
	}
	if l.Elected && l.Since.IsZero() {
		l.Since = time.Now()
		if o.last.Elected && o.last.Token == l.Token {
			l.Since = o.last.Since // the same term, proclaiming
		}
	}
	select {
	case o.out <- l:
		o.last, o.sent = l, true
	case <-ctx.Done():
	}
	return nil
}
