package lock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/internal/waitq"
)

// handoffsInARow bounds how many releases of a key in a row a Manager hands
// to its own longest waiter directly. The release after them is left to the
// backend's release hint (or, without one, to the waiters' polls), which
// reaches every Manager's waiters alike, so a Manager whose goroutines take
// turns on a key cannot shut out the waiters of other Managers: a hand-off
// that nobody else can win is followed by one that anyone may.
const handoffsInARow = 1

// waiters queues the waiting Acquire calls of one Manager, one queue per key,
// longest-waiting first. With fifo, only a queue's head attempts: later
// arrivals wait behind it instead of barging in, a release through the
// Manager wakes the head, as does the backend's release hint, and a head
// that leaves without the lock wakes the next. So hand-offs within a Manager
// go in arrival order, and one release costs one attempt, not one per
// waiter. Without fifo (a backend that queues waiters on its server) the
// queues only count.
type waiters struct {
	fifo bool
	// shared, if set, reports keys that several owners may hold at once:
	// a waiter that takes one wakes the next, which may take it too.
	shared func(key string) bool
	n      atomic.Int64 // waiters queued on any key, so that none costs no lock

	mu       sync.Mutex
	queue    waitq.Queue[*waiter] // guarded by mu
	handoffs map[string]int       // by key: releases handed to its head in their round trip, in a row; guarded by mu
}

// A waiter is one waiting Acquire in its key's queue.
type waiter struct {
	key      string
	owner    string        // the owner it attempts as, for a hand-over
	ttl      time.Duration // the lease it asks for, for a hand-over
	turn     waitq.Wake    // wakes the Acquire to attempt
	acquired bool          // it took the lock; guarded by waiters.mu
	left     bool          // its Acquire returned; guarded by waiters.mu
	granted  *grant        // a release handed it the lock; guarded by waiters.mu
}

// A grant is a lock a release took for a waiter (driver.HandoverReleaser).
type grant struct {
	token uint64
	start time.Time // when the release that took it was sent
}

// waiting returns how many wait for key.
func (ws *waiters) waiting(key string) int {
	if ws.n.Load() == 0 {
		return 0
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.queue.Len(key)
}

// join queues a waiter for key, attempting as owner for a lease of ttl, at
// the tail; leave must be called once its Acquire returns.
func (ws *waiters) join(key, owner string, ttl time.Duration) *waiter {
	w := &waiter{key: key, owner: owner, ttl: ttl, turn: waitq.NewWake()}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.queue.Join(key, w)
	ws.n.Add(1)
	return w
}

// leave unlinks w. If it was the head and did not take the lock, the next
// waiter becomes head and is woken to attempt, so no departed waiter (one
// cancelled or out of time) holds up the queue; on a shared key the next
// is woken also when w took it. It returns the lock a release handed w
// that w did not take (take), which the caller must release.
func (ws *waiters) leave(w *waiter) (untaken *grant) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.left = true
	if !w.acquired {
		untaken = w.granted
	}
	next, wasHead := ws.queue.Leave(w.key, w)
	ws.n.Add(-1)
	switch {
	case ws.queue.Len(w.key) == 0:
		delete(ws.handoffs, w.key)
	case ws.fifo && wasHead && untaken == nil && (!w.acquired || ws.shared != nil && ws.shared(w.key)):
		next.turn.Signal()
	}
	return untaken
}

// head returns the longest waiter for key, if its queue decides who
// attempts next and the key is held by one owner at a time, else nil.
func (ws *waiters) head(key string) *waiter {
	if !ws.fifo || ws.shared != nil || ws.n.Load() == 0 {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.queue.First(key); ok && w.granted == nil {
		return w
	}
	return nil
}

// grant gives w a lock a release took for it and wakes it. It returns false
// if w's Acquire has returned: the caller must release the lock.
func (ws *waiters) grant(w *waiter, g *grant) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.left {
		return false
	}
	w.granted = g
	w.turn.Signal()
	return true
}

// take returns the lock a release handed w, if any, and records that w
// took it (see acquired).
func (ws *waiters) take(w *waiter) *grant {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.granted != nil {
		w.acquired = true
	}
	return w.granted
}

// behind reports whether w must let a longer waiter attempt first.
func (ws *waiters) behind(w *waiter) bool {
	if !ws.fifo {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.queue.Behind(w.key, w)
}

// acquired records that w took the lock, so its leaving wakes nobody: the
// next waiter waits for the lock's release.
func (ws *waiters) acquired(w *waiter) {
	ws.mu.Lock()
	w.acquired = true
	ws.mu.Unlock()
}

// handOff reports whether a release of key is to wake the head of key's
// queue directly, and counts it: true if this Manager's queue decides who
// attempts next, someone waits and fewer than handoffsInARow releases
// before were handed off so.
func (ws *waiters) handOff(key string) bool {
	if !ws.fifo || ws.n.Load() == 0 {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.queue.Len(key) == 0:
		return false
	case ws.handoffs[key] >= handoffsInARow:
		delete(ws.handoffs, key)
		return false
	case ws.handoffs == nil:
		ws.handoffs = make(map[string]int)
	}
	ws.handoffs[key]++
	return true
}

// wakeHead wakes the head waiter of key, if any.
func (ws *waiters) wakeHead(key string) {
	ws.mu.Lock()
	if w, ok := ws.queue.First(key); ok {
		w.turn.Signal()
	}
	ws.mu.Unlock()
}

// Waiting returns how many Acquire calls through m wait for key: they found
// it held and wait for their turn. Across Managers it knows nothing: a
// waiter of another Manager, or of another process, is not counted.
func (m *Manager) Waiting(key string) int {
	return m.waiters.waiting(key)
}
