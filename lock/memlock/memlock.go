// Package memlock is an in-process lock backend that keeps the full lock
// contract: fencing tokens, renewal, loss detection, waking waiters on
// release. It is for tests and single-process programs; it coordinates
// goroutines of one process only.
package memlock

import (
	"context"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
)

// A Locker is an in-process lock.Locker. Use New; it needs no Close.
type Locker struct {
	*lock.Manager
	s *store
}

var _ lock.Locker = (*Locker)(nil)

// New returns an empty in-process Locker.
//
// Tokens start at the current Unix time in microseconds and grow by one per
// acquisition, so a new Locker (a restarted process) issues tokens above an
// earlier one's unless that one issued more than a million per second of its
// life.
func New() *Locker {
	s := &store{
		locks: make(map[string]*entry),
		next:  uint64(time.Now().UnixMicro()),
	}
	m, _ := lock.NewManager(s) // s is not nil
	return &Locker{Manager: m, s: s}
}

// Revoke deletes key's lock whoever holds it, as an operator or a failover
// would. The holder's lease is lost at its next renewal.
func (l *Locker) Revoke(key string) {
	l.s.mu.Lock()
	delete(l.s.locks, key)
	l.s.mu.Unlock()
	l.s.notify(key)
}

// errNotHeld is the answer of a renewal or release that found the lock not
// ours: released, expired, revoked or another owner's.
var errNotHeld = lockerr.NotHeld("memlock: the lock expired or another owner holds it")

type entry struct {
	owner    string
	token    uint64
	acquired time.Time
	expires  time.Time
}

type store struct {
	mu      sync.Mutex
	locks   map[string]*entry // guarded by mu
	next    uint64            // last token issued; guarded by mu
	waiters waitq.Watchers

	holderWatchers waitq.Watchers // WatchHolder's
}

func (s *store) TryAcquire(_ context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if e, ok := s.locks[key]; ok && now.Before(e.expires) {
		return 0, e.expires.Sub(now), lock.ErrNotAcquired
	}
	s.next++
	s.locks[key] = &entry{owner: owner, token: s.next, acquired: now, expires: now.Add(ttl)}
	s.holderWatchers.Notify(key)
	return s.next, 0, nil
}

func (s *store) Renew(_ context.Context, key, owner string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e, ok := s.locks[key]
	if !ok || e.owner != owner || !now.Before(e.expires) {
		return errNotHeld
	}
	e.expires = now.Add(ttl)
	return nil
}

func (s *store) Release(_ context.Context, key, owner string) error {
	s.mu.Lock()
	e, ok := s.locks[key]
	if !ok || e.owner != owner || !time.Now().Before(e.expires) {
		s.mu.Unlock()
		return errNotHeld
	}
	delete(s.locks, key)
	s.mu.Unlock()
	s.notify(key)
	return nil
}

func (s *store) WatchRelease(_ context.Context, key string) (<-chan struct{}, func(), error) {
	w, stop := s.waiters.Watch(key)
	return w, stop, nil
}

// notify wakes every waiter and holder watcher of key; the lock.Manager
// lets only the longest waiter of each Locker's attempt.
func (s *store) notify(key string) {
	s.waiters.Notify(key)
	s.holderWatchers.Notify(key)
}
