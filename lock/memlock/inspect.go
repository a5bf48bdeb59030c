package memlock

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// InspectLock implements lock.Inspector. It knows everything: the
// acquisition time, the time left and the number of waiting Acquires.
func (l *Locker) InspectLock(_ context.Context, key string) (lock.LockInfo, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.infoLocked(key, time.Now()), nil
}

// ListLocks implements lock.Lister; the cursor is the last key listed.
func (l *Locker) ListLocks(_ context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	if cursor != "" && !strings.HasPrefix(cursor, prefix) {
		return lock.LockPage{}, fmt.Errorf("%w: memlock: cursor is not of this prefix", lock.ErrInvalid)
	}
	now := time.Now()
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	var keys []string
	for k, e := range l.s.locks {
		if strings.HasPrefix(k, prefix) && k > cursor && now.Before(e.expires) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var page lock.LockPage
	if len(keys) > limit {
		keys = keys[:limit]
		page.Cursor = keys[limit-1]
	}
	for _, k := range keys {
		page.Locks = append(page.Locks, l.s.infoLocked(k, now))
	}
	return page, nil
}

// BreakLock implements lock.Breaker.
func (l *Locker) BreakLock(_ context.Context, key string) (lock.LockInfo, error) {
	l.s.mu.Lock()
	info := l.s.infoLocked(key, time.Now())
	if info.Held {
		delete(l.s.locks, key)
	}
	l.s.mu.Unlock()
	if !info.Held {
		return info, fmt.Errorf("%w: memlock: %q is not held", lock.ErrNotHeld, key)
	}
	l.s.notify(key)
	return info, nil
}

func (s *store) infoLocked(key string, now time.Time) lock.LockInfo {
	info := lock.LockInfo{Key: key, Waiters: s.waiters.Len(key)}
	info.Waiting = info.Waiters > 0
	e, ok := s.locks[key]
	if !ok || !now.Before(e.expires) {
		return info
	}
	_, info.Holder, _ = lock.ParseOwner(e.owner)
	info.Held, info.Token, info.AcquiredAt, info.TimeLeft = true, e.token, e.acquired, e.expires.Sub(now)
	return info
}
