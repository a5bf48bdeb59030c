// Package waitq is how a waiting Acquire waits for its turn: wake-ups that
// coalesce (Wake), the lines of a Locker's waiting calls per key, of which
// only the first attempts (Queue), and where the server keeps the line
// (lock/etcdlock, lock/zklock) each owner's contender with the watches that
// wake it (Registry, Waiter); and where a release is heard in this process,
// the wake-ups of those who watch each key (Watchers).
package waitq

import (
	"slices"
	"sync"
)

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

// Watchers holds, for each key, the Wakes of those watching it. The zero
// value is empty and ready for use; it is safe for concurrent use.
type Watchers struct {
	mu   sync.Mutex
	keys map[string]map[Wake]struct{} // guarded by mu
}

// Watch returns a new Wake that Notify(key) signals, and the stop that ends
// the watch.
func (ws *Watchers) Watch(key string) (Wake, func()) {
	w := NewWake()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.keys == nil {
		ws.keys = make(map[string]map[Wake]struct{})
	}
	if ws.keys[key] == nil {
		ws.keys[key] = make(map[Wake]struct{})
	}
	ws.keys[key][w] = struct{}{}
	return w, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		delete(ws.keys[key], w)
		if len(ws.keys[key]) == 0 {
			delete(ws.keys, key)
		}
	}
}

// Len returns how many watch key.
func (ws *Watchers) Len(key string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.keys[key])
}

// Notify wakes every watcher of key.
func (ws *Watchers) Notify(key string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.keys[key] {
		w.Signal()
	}
}

// NotifyAll wakes every watcher of every key.
func (ws *Watchers) NotifyAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, set := range ws.keys {
		for w := range set {
			w.Signal()
		}
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
