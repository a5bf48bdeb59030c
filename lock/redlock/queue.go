package redlock

import (
	"context"
	"sync"
)

// A local queue orders the waiting Acquire calls of one Locker on one key,
// longest-waiting first. Only its head attempts the key; the others are told
// lock.ErrNotAcquired without a server call. So a release by this Locker hands
// the lock to one waiter, which finds every node free, instead of letting all
// of them split the nodes' votes between them, give back and retry.
type localQueues struct {
	mu     sync.Mutex
	queues map[string]*localQueue  // by key; guarded by mu
	owners map[string]*localWaiter // by owner; guarded by mu
}

type localQueue struct{ head, tail *localWaiter }

type localWaiter struct {
	key, owner string
	wake       chan struct{} // the Acquire's wake-up channel (capacity 1)
	prev, next *localWaiter  // guarded by localQueues.mu
	acquired   bool          // guarded by localQueues.mu
}

func newLocalQueues() *localQueues {
	return &localQueues{queues: map[string]*localQueue{}, owners: map[string]*localWaiter{}}
}

// join queues owner's Acquire on key; leave must be called once it returns.
func (q *localQueues) join(key, owner string, wake chan struct{}) *localWaiter {
	w := &localWaiter{key: key, owner: owner, wake: wake}
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[key]
	if lq == nil {
		lq = &localQueue{}
		q.queues[key] = lq
	}
	if lq.tail == nil {
		lq.head, lq.tail = w, w
	} else {
		w.prev, lq.tail.next, lq.tail = lq.tail, w, w
	}
	q.owners[owner] = w
	return w
}

// leave unlinks w; if it was the head and did not take the lock, the next
// waiter becomes head and is woken to attempt.
func (q *localQueues) leave(w *localWaiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[w.key]
	wasHead := lq.head == w
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		lq.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		lq.tail = w.prev
	}
	w.prev, w.next = nil, nil
	delete(q.owners, w.owner)
	switch {
	case lq.head == nil:
		delete(q.queues, w.key)
	case wasHead && !w.acquired:
		wakeUp(lq.head.wake)
	}
}

// behind reports whether owner waits for key behind another waiter.
func (q *localQueues) behind(key, owner string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.owners[owner]
	return w != nil && w.key == key && q.queues[key].head != w
}

// acquired records that owner took key, so its leaving wakes nobody.
func (q *localQueues) acquired(key, owner string) {
	q.mu.Lock()
	if w := q.owners[owner]; w != nil && w.key == key {
		w.acquired = true
	}
	q.mu.Unlock()
}

// wakeHead wakes the head waiter of key, or own if key has no queue.
func (q *localQueues) wakeHead(key string, own chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if lq := q.queues[key]; lq != nil {
		wakeUp(lq.head.wake)
		return
	}
	wakeUp(own)
}

// released wakes the head waiter of key.
func (q *localQueues) released(key string) {
	q.mu.Lock()
	if lq := q.queues[key]; lq != nil {
		wakeUp(lq.head.wake)
	}
	q.mu.Unlock()
}

func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// WatchReleaseOwner implements lock.OwnerWatcher: it watches key on every
// node, and the Acquire trying key as owner joins this Locker's local queue
// for key.
func (b *backend) WatchReleaseOwner(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	// A release seen on a node wakes whichever waiter of this Locker the
	// node's subscription picked; it is passed on to the head, the only
	// one that attempts.
	wake, stopWatch, err := b.watch(ctx, key, func(own chan struct{}) { b.local.wakeHead(key, own) })
	if err != nil {
		// No node can watch: the Acquire polls, so it must not queue
		// behind others that nobody would wake it after.
		return nil, nil, err
	}
	w := b.local.join(key, owner, wake)
	return wake, func() {
		b.local.leave(w)
		stopWatch()
	}, nil
}
