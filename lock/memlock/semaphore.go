package memlock

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// Semaphores is an in-process semaphore.Client: counting semaphores with the
// full permit contract among the goroutines of one process. Use
// NewSemaphores; it needs no Close.
type Semaphores struct {
	*semaphore.Client
	s *semStore
}

// NewSemaphores returns an in-process semaphore Client with no permits held.
// Tokens start at the current Unix time in microseconds, as New's do.
func NewSemaphores() *Semaphores {
	s := &semStore{
		sems: make(map[string]*semEntry),
		next: uint64(time.Now().UnixMicro()),
	}
	c, _ := semaphore.New(s) // s is not nil
	return &Semaphores{Client: c, s: s}
}

// Revoke deletes every permit of name whoever holds it, as an operator
// would. The holders' permits are lost at their next renewal.
func (ss *Semaphores) Revoke(name string) {
	ss.s.mu.Lock()
	delete(ss.s.sems, name)
	ss.s.mu.Unlock()
	ss.s.waiters.Notify(name)
}

var errPermitNotHeld = lockerr.NotHeld("memlock: the permit expired or was revoked")

// semEntry is one name's held permits.
type semEntry struct {
	permits int // N, as the holders agreed on it
	holders map[string]*semHolder
}

type semHolder struct {
	count   int
	token   uint64
	taken   time.Time
	expires time.Time
}

type semStore struct {
	mu      sync.Mutex
	sems    map[string]*semEntry // guarded by mu
	next    uint64               // last token issued; guarded by mu
	waiters waitq.Watchers       // by name
}

var (
	_ semaphore.Backend        = (*semStore)(nil)
	_ semaphore.ReleaseWatcher = (*semStore)(nil)
	_ semaphore.Inspector      = (*semStore)(nil)
)

// live returns name's entry with expired holders dropped, nil if nobody
// holds a permit. Call with mu held.
func (s *semStore) live(name string, now time.Time) *semEntry {
	e := s.sems[name]
	if e == nil {
		return nil
	}
	for o, h := range e.holders {
		if !now.Before(h.expires) {
			delete(e.holders, o)
		}
	}
	if len(e.holders) == 0 {
		delete(s.sems, name)
		return nil
	}
	return e
}

func (s *semStore) TryAcquire(_ context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(r.Name, now)
	if e == nil {
		e = &semEntry{permits: r.Permits, holders: make(map[string]*semHolder)}
		s.sems[r.Name] = e
	}
	if e.permits != r.Permits {
		return 0, 0, &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: e.permits}
	}
	used := 0
	var soonest time.Time
	for _, h := range e.holders {
		used += h.count
		if soonest.IsZero() || h.expires.Before(soonest) {
			soonest = h.expires
		}
	}
	if used+r.Count > e.permits {
		return 0, max(soonest.Sub(now), time.Millisecond), lock.ErrNotAcquired
	}
	s.next++
	e.holders[owner] = &semHolder{count: r.Count, token: s.next, taken: now, expires: now.Add(ttl)}
	return s.next, 0, nil
}

func (s *semStore) Renew(_ context.Context, r semaphore.Request, owner string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(r.Name, now)
	if e == nil || e.holders[owner] == nil {
		return errPermitNotHeld
	}
	e.holders[owner].expires = now.Add(ttl)
	return nil
}

func (s *semStore) Release(_ context.Context, r semaphore.Request, owner string) error {
	s.mu.Lock()
	e := s.live(r.Name, time.Now())
	if e == nil || e.holders[owner] == nil {
		s.mu.Unlock()
		return errPermitNotHeld
	}
	delete(e.holders, owner)
	if len(e.holders) == 0 {
		delete(s.sems, r.Name)
	}
	s.mu.Unlock()
	s.waiters.Notify(r.Name)
	return nil
}

// WatchRelease implements semaphore.ReleaseWatcher: a release wakes the
// waiters of every count.
func (s *semStore) WatchRelease(_ context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop := s.waiters.Watch(name)
	return w, stop, nil
}

// InspectSemaphore implements semaphore.Inspector.
func (s *semStore) InspectSemaphore(_ context.Context, name string) (semaphore.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	info := semaphore.Info{Name: name, LastToken: s.next}
	e := s.live(name, now)
	if e == nil {
		return info, nil
	}
	info.Permits = e.permits
	for o, h := range e.holders {
		_, label, _ := lock.ParseOwner(o)
		info.Used += h.count
		info.Holders = append(info.Holders, semaphore.HolderInfo{
			Holder: label, Token: h.token, Count: h.count, TimeLeft: h.expires.Sub(now),
		})
	}
	slices.SortFunc(info.Holders, func(a, b semaphore.HolderInfo) int { return cmp.Compare(a.Token, b.Token) })
	info.Waiting = s.waiters.Len(name) > 0
	return info, nil
}

// Backend returns the store behind ss, for another semaphore.Client on the
// same permits (semaphore.New), as a separate part of the program with its
// own waiters and renewals would have.
func (ss *Semaphores) Backend() semaphore.Backend { return ss.s }
