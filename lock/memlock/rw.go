package memlock

import (
	"context"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// NewRW returns an empty in-process read-write Locker, with the contract of
// package rwlock. Tokens start as New's do.
func NewRW() *rwlock.Locker {
	l, _ := rwlock.New(newRWStore()) // not nil
	return l
}

// rwEntry is one name's read-write lock.
type rwEntry struct {
	writer  string // "" when no writer holds
	wExp    time.Time
	wToken  uint64
	readers map[string]hold      // by owner
	intents map[string]time.Time // waiting writers' intents, by owner: their ends
}

type hold struct {
	token   uint64
	expires time.Time
}

// rwStore is rwlock.Backend in this process's memory.
type rwStore struct {
	mu      sync.Mutex
	names   map[string]*rwEntry // guarded by mu
	next    uint64              // last token issued; guarded by mu
	waiters waitq.Watchers
}

var (
	_ rwlock.Backend        = (*rwStore)(nil)
	_ rwlock.ReleaseWatcher = (*rwStore)(nil)
	_ rwlock.Inspector      = (*rwStore)(nil)
)

func newRWStore() *rwStore {
	return &rwStore{
		names: make(map[string]*rwEntry),
		next:  uint64(time.Now().UnixMicro()),
	}
}

// entryLocked returns name's entry with expired holds and intents dropped;
// nil if nothing is left of it. Call with s.mu held.
func (s *rwStore) entryLocked(name string, now time.Time) *rwEntry {
	e := s.names[name]
	if e == nil {
		return nil
	}
	if e.writer != "" && !now.Before(e.wExp) {
		e.writer = ""
	}
	for o, h := range e.readers {
		if !now.Before(h.expires) {
			delete(e.readers, o)
		}
	}
	for o, end := range e.intents {
		if !now.Before(end) {
			delete(e.intents, o)
		}
	}
	if e.writer == "" && len(e.readers) == 0 && len(e.intents) == 0 {
		delete(s.names, name)
		return nil
	}
	return e
}

func (s *rwStore) TryAcquire(_ context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.entryLocked(name, now)
	if e == nil {
		e = &rwEntry{readers: make(map[string]hold), intents: make(map[string]time.Time)}
		s.names[name] = e
	}
	switch {
	case e.writer != "":
		if intent {
			e.intents[owner] = now.Add(rwlock.IntentTTL)
		}
		return 0, max(e.wExp.Sub(now), time.Millisecond), lock.ErrNotAcquired
	case mode == rwlock.Read && len(e.intents) > 0:
		return 0, 0, lock.ErrNotAcquired
	case mode == rwlock.Write && len(e.readers) > 0:
		if intent {
			e.intents[owner] = now.Add(rwlock.IntentTTL)
		}
		var last time.Time
		for _, h := range e.readers {
			if h.expires.After(last) {
				last = h.expires
			}
		}
		return 0, max(last.Sub(now), time.Millisecond), lock.ErrNotAcquired
	}
	s.next++
	if mode == rwlock.Read {
		e.readers[owner] = hold{token: s.next, expires: now.Add(ttl)}
	} else {
		e.writer, e.wExp, e.wToken = owner, now.Add(ttl), s.next
		delete(e.intents, owner)
	}
	return s.next, 0, nil
}

func (s *rwStore) Renew(_ context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.entryLocked(name, now)
	switch {
	case e == nil:
	case mode == rwlock.Write && e.writer == owner:
		e.wExp = now.Add(ttl)
		return nil
	case mode == rwlock.Read:
		if h, ok := e.readers[owner]; ok {
			h.expires = now.Add(ttl)
			e.readers[owner] = h
			return nil
		}
	}
	return errNotHeld
}

func (s *rwStore) Release(_ context.Context, name, owner string, mode rwlock.Mode) error {
	s.mu.Lock()
	e := s.entryLocked(name, time.Now())
	ok, wake := false, false
	switch {
	case e == nil:
	case mode == rwlock.Write && e.writer == owner:
		e.writer, ok, wake = "", true, true
	case mode == rwlock.Read:
		if _, ok = e.readers[owner]; ok {
			delete(e.readers, owner)
			wake = len(e.readers) == 0
		}
	}
	s.mu.Unlock()
	if !ok {
		return errNotHeld
	}
	if wake {
		s.waiters.Notify(name)
	}
	return nil
}

func (s *rwStore) Withdraw(_ context.Context, name, owner string) error {
	s.mu.Lock()
	if e := s.entryLocked(name, time.Now()); e != nil {
		delete(e.intents, owner)
	}
	s.mu.Unlock()
	s.waiters.Notify(name)
	return nil
}

func (s *rwStore) WatchRelease(_ context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop := s.waiters.Watch(name)
	return w, stop, nil
}

// InspectRW implements rwlock.Inspector. Info.Token is the store's last
// token: its names share one counter.
func (s *rwStore) InspectRW(_ context.Context, name string) (rwlock.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	info := rwlock.Info{Token: s.next}
	e := s.entryLocked(name, now)
	if e == nil {
		return info, nil
	}
	if e.writer != "" {
		info.Writer = &rwlock.Holder{Label: e.writer, Token: e.wToken, TimeLeft: e.wExp.Sub(now)}
	}
	for o, h := range e.readers {
		info.Readers = append(info.Readers, rwlock.Holder{Label: o, Token: h.token, TimeLeft: h.expires.Sub(now)})
	}
	info.WritersWaiting = len(e.intents)
	return info, nil
}
