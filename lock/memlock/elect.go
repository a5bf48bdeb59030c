package memlock

import (
	"context"
	"time"

	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	_ driver.Relabeler     = (*store)(nil)
	_ driver.HolderWatcher = (*store)(nil)
)

// Relabel implements driver.Relabeler.
func (s *store) Relabel(_ context.Context, key, owner, newOwner string) error {
	s.mu.Lock()
	e, ok := s.locks[key]
	if !ok || e.owner != owner || !time.Now().Before(e.expires) {
		s.mu.Unlock()
		return errNotHeld
	}
	e.owner = newOwner
	s.mu.Unlock()
	s.holderWatchers.Notify(key)
	return nil
}

// WatchHolder implements driver.HolderWatcher: acquisitions, releases,
// revocations and relabels signal at once; an expiry is signalled by a
// timer set for the holder's expiry, which a renewal only moves.
func (s *store) WatchHolder(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	out := waitq.NewWake()
	ch, stop := s.holderWatchers.Watch(key)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		arm := func() {
			s.mu.Lock()
			d := time.Hour
			if e, ok := s.locks[key]; ok {
				d = max(time.Until(e.expires), 0) + time.Millisecond
			}
			s.mu.Unlock()
			timer.Reset(d)
		}
		arm()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			case <-timer.C:
				s.mu.Lock()
				e, ok := s.locks[key]
				renewed := ok && time.Now().Before(e.expires)
				s.mu.Unlock()
				if renewed { // not expired: renewed since the timer was set
					arm()
					continue
				}
			}
			out.Signal()
			arm()
		}
	}()
	return out, func() { cancel(); <-done; stop() }, nil
}
