package memlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// The operator's view of read-write locks and semaphores: their names in
// order, the cursor the last name listed, and breaking one holder, which is
// its release done for it.

var (
	_ rwlock.Lister     = (*rwStore)(nil)
	_ rwlock.Breaker    = (*rwStore)(nil)
	_ semaphore.Lister  = (*semStore)(nil)
	_ semaphore.Breaker = (*semStore)(nil)
)

// page returns at most limit of names (sorted here) after cursor that
// start with prefix, and the next cursor.
func page(names []string, prefix string, limit int, cursor string) ([]string, string, error) {
	if cursor != "" && !strings.HasPrefix(cursor, prefix) {
		return nil, "", fmt.Errorf("%w: memlock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && n > cursor {
			out = append(out, n)
		}
	}
	if len(out) > limit {
		return out[:limit], out[limit-1], nil
	}
	return out, "", nil
}

// ListRW implements rwlock.Lister.
func (s *rwStore) ListRW(_ context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	s.mu.Lock()
	now := time.Now()
	var names []string
	for n := range s.names {
		if e := s.entryLocked(n, now); e != nil && (e.writer != "" || len(e.readers) > 0) {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	return page(names, prefix, limit, cursor)
}

// BreakRW implements rwlock.Breaker.
func (s *rwStore) BreakRW(ctx context.Context, name string, token uint64) (rwlock.Holder, bool, error) {
	h, writer, err := rwlock.HolderOf(ctx, s, name, token)
	if err != nil {
		return h, writer, err
	}
	return h, writer, s.Release(ctx, name, h.Label, rwlock.ModeOf(writer))
}

// ListSemaphores implements semaphore.Lister.
func (s *semStore) ListSemaphores(_ context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	s.mu.Lock()
	now := time.Now()
	var names []string
	for n := range s.sems {
		if s.live(n, now) != nil {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	return page(names, prefix, limit, cursor)
}

// BreakPermits implements semaphore.Breaker.
func (s *semStore) BreakPermits(_ context.Context, name string, token uint64) (semaphore.HolderInfo, error) {
	s.mu.Lock()
	now := time.Now()
	e := s.live(name, now)
	for o, h := range e.holdersOrNil() {
		if h.token != token {
			continue
		}
		_, label, _ := lock.ParseOwner(o)
		info := semaphore.HolderInfo{Holder: label, Token: h.token, Count: h.count, TimeLeft: h.expires.Sub(now)}
		delete(e.holders, o)
		if len(e.holders) == 0 {
			delete(s.sems, name)
		}
		s.mu.Unlock()
		s.waiters.Notify(name)
		return info, nil
	}
	s.mu.Unlock()
	return semaphore.HolderInfo{}, lockerr.NotHeld(fmt.Sprintf("memlock: no holder of semaphore %q has token %d", name, token))
}

// holdersOrNil returns e's holders, nil for a nil e.
func (e *semEntry) holdersOrNil() map[string]*semHolder {
	if e == nil {
		return nil
	}
	return e.holders
}
