// Package waitq is how a waiting Acquire waits for its turn: wake-ups that
// coalesce (Wake), the lines of a Locker's waiting calls per key, of which
// only the first attempts (Queue), and where the server keeps the line
// (lock/etcdlock, lock/zklock) each owner's contender with the watches that
// wake it (Registry, Waiter).
package waitq

import "slices"

// A Wake tells a waiter to look again. It holds one wake-up: those sent
// before the waiter looks coalesce into one, and none is lost. A nil Wake
// ignores every wake-up and, received from, never wakes.
type Wake chan struct{}

// NewWake returns a Wake that holds one wake-up.
func NewWake() Wake { return make(Wake, 1) }

// Signal wakes the waiter, unless a wake-up is already pending.
func (w Wake) Signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// A Queue holds, for each key, the waiters of that key in arrival order; the
// first is the one whose turn it is. The zero value is empty and ready for
// use. A Queue is not safe for concurrent use: its owner guards it with the
// mutex that guards its waiters.
type Queue[W comparable] struct {
	lines map[string][]W
}

// Join queues w for key, behind every waiter queued there before it.
func (q *Queue[W]) Join(key string, w W) {
	if q.lines == nil {
		q.lines = make(map[string][]W)
	}
	q.lines[key] = append(q.lines[key], w)
}

// Len returns how many wait for key.
func (q *Queue[W]) Len(key string) int { return len(q.lines[key]) }

// First returns the first waiter for key, and false if none waits.
func (q *Queue[W]) First(key string) (w W, ok bool) {
	if line := q.lines[key]; len(line) > 0 {
		return line[0], true
	}
	return w, false
}

// Behind reports whether w, queued for key, waits behind another.
func (q *Queue[W]) Behind(key string, w W) bool {
	first, ok := q.First(key)
	return ok && first != w
}

// Leave removes w from key's line, if it is there. If w was first and
// another waits, it returns that one, whose turn it now is, and true.
func (q *Queue[W]) Leave(key string, w W) (next W, ok bool) {
	line := q.lines[key]
	i := slices.Index(line, w)
	if i < 0 {
		return next, false
	}
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(q.lines, key)
		return next, false
	}
	q.lines[key] = line
	return line[0], i == 0
}
