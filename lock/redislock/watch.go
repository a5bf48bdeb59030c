package redislock

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timing of the shared subscription.
const (
	// subscribeWait bounds how long the first waiting Acquire of a Locker
	// waits for the subscription to be confirmed before its first attempt.
	subscribeWait = time.Second
	// pingInterval is how long the subscription may be silent before it is
	// pinged; a ping unanswered for as long again means the connection is
	// dead without an error (a partition) and it is opened anew.
	pingInterval = 5 * time.Second
	// maxResubscribeBackoff bounds the pause between failed reconnections.
	maxResubscribeBackoff = time.Second
)

type subState int

const (
	idle       subState = iota // not started: nobody has waited yet
	connecting                 // subscribing, not yet confirmed
	ready                      // subscribed: wake-ups are delivered
	failing                    // the last attempt to subscribe failed
	closed                     // Close was called
)

// A waiter is one waiting Acquire, in its key's queue.
type waiter struct {
	key        string
	owner      string
	wake       chan struct{} // capacity 1: a pending wake-up; nil if notify is set
	notify     func()        // called instead of a send on wake, under watcher.mu
	prev, next *waiter       // queue links; guarded by watcher.mu
	acquired   bool          // it took the lock; guarded by watcher.mu
}

// A queue holds the waiters of one key, longest-waiting first.
type queue struct{ head, tail *waiter }

// watcher is a Locker's one pub/sub subscription, shared by all its waiters,
// and its queues of waiters. A release wakes only the head of its key's queue,
// which is the only waiter of this Locker that attempts the key; later
// arrivals queue behind it instead of barging in. So hand-offs go in arrival
// order, and one release costs one attempt, not one per waiter. A waiter that
// leaves (acquired, cancelled, timed out) is unlinked at once, and if it was
// the head and did not take the lock, the new head is woken in its place:
// no departed waiter can hold up the queue.
type watcher struct {
	b *backend

	mu      sync.Mutex
	state   subState           // guarded by mu
	ps      *redis.PubSub      // guarded by mu
	changed chan struct{}      // closed on every state change; guarded by mu
	queues  map[string]*queue  // by key; guarded by mu
	owners  map[string]*waiter // by owner; guarded by mu
	done    chan struct{}      // closed when the subscription goroutine ends
}

func newWatcher(b *backend) *watcher {
	return &watcher{
		b:       b,
		changed: make(chan struct{}),
		queues:  make(map[string]*queue),
		owners:  make(map[string]*waiter),
		done:    make(chan struct{}),
	}
}

// watch queues a waiter for key. The first call starts the subscription and
// waits up to subscribeWait (or until ctx is done) for it to be confirmed, so
// that no release after the first attempt goes unheard. If the subscription
// is down, waiters are still queued and fall back on the Manager's poll.
func (w *watcher) watch(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	wt := &waiter{key: key, owner: owner, wake: make(chan struct{}, 1)}
	subscribing, err := w.join(wt)
	if err != nil {
		return nil, nil, err
	}
	if subscribing != nil {
		t := time.NewTimer(subscribeWait)
		select {
		case <-subscribing:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return wt.wake, func() { w.leave(wt) }, nil
}

// join queues wt, starting the subscription if nobody has waited yet. If the
// subscription is not confirmed yet it returns a channel closed when its
// state next changes.
func (w *watcher) join(wt *waiter) (subscribing <-chan struct{}, err error) {
	key, owner := wt.key, wt.owner
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == closed {
		return nil, errClosed
	}
	if w.state == idle {
		w.setStateLocked(connecting)
		go w.run()
	}
	q := w.queues[key]
	if q == nil {
		q = &queue{}
		w.queues[key] = q
	}
	if q.tail == nil {
		q.head, q.tail = wt, wt
	} else {
		wt.prev, q.tail.next, q.tail = q.tail, wt, wt
	}
	if owner != "" {
		w.owners[owner] = wt
	}
	if w.state == connecting {
		return w.changed, nil
	}
	return nil, nil
}

// leave unlinks wt; if it was the head and did not take the lock, the next
// waiter becomes head and is woken to attempt.
func (w *watcher) leave(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[wt.key]
	wasHead := q.head == wt
	if wt.prev != nil {
		wt.prev.next = wt.next
	} else {
		q.head = wt.next
	}
	if wt.next != nil {
		wt.next.prev = wt.prev
	} else {
		q.tail = wt.prev
	}
	wt.prev, wt.next = nil, nil
	if wt.owner != "" {
		delete(w.owners, wt.owner)
	}
	switch {
	case q.head == nil:
		delete(w.queues, wt.key)
	case wasHead && !wt.acquired:
		signal(q.head)
	}
}

// behind reports whether owner waits for key behind another waiter of this
// Locker, in which case it must not attempt yet.
func (w *watcher) behind(key, owner string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := w.owners[owner]
	return wt != nil && wt.key == key && w.queues[key].head != wt
}

// acquired records that owner took the lock, so its leaving wakes nobody.
func (w *watcher) acquired(key, owner string) {
	w.mu.Lock()
	if wt := w.owners[owner]; wt != nil && wt.key == key {
		wt.acquired = true
	}
	w.mu.Unlock()
}

// released wakes the head waiter of key.
func (w *watcher) released(key string) {
	w.mu.Lock()
	if q := w.queues[key]; q != nil {
		signal(q.head)
	}
	w.mu.Unlock()
}

// wakeAll wakes the head of every queue, after the subscription was
// (re)established and releases may have gone unheard.
func (w *watcher) wakeAll() {
	w.mu.Lock()
	for _, q := range w.queues {
		signal(q.head)
	}
	w.mu.Unlock()
}

func signal(wt *waiter) {
	if wt.notify != nil {
		wt.notify()
		return
	}
	select {
	case wt.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// onMessage handles a release message: the releasing Locker's id, then the
// lock's Redis key. This Locker's own releases were handed off locally.
func (w *watcher) onMessage(payload string) {
	const idLen = 16
	if len(payload) <= idLen || payload[:idLen] == w.b.id {
		return
	}
	if key, ok := userKey(w.b.prefix, payload[idLen:]); ok {
		w.released(key)
	}
}

func (w *watcher) setStateLocked(s subState) {
	if w.state == s || w.state == closed {
		return
	}
	w.state = s
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watcher) setState(s subState) {
	w.mu.Lock()
	w.setStateLocked(s)
	w.mu.Unlock()
}

// install makes ps the current subscription; false means the watcher was
// closed meanwhile and ps must be closed by the caller.
func (w *watcher) install(ps *redis.PubSub) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == closed {
		return false
	}
	w.ps = ps
	return true
}

// run owns the subscription: it receives release messages and keeps the
// connection alive, reconnecting after errors and silent failures, until
// close.
func (w *watcher) run() {
	defer close(w.done)
	var ps *redis.PubSub
	defer func() {
		if ps != nil {
			_ = ps.Close()
		}
	}()
	ctx := context.Background()
	var silent, fails int
	for {
		if ps == nil {
			ps = w.b.client.Subscribe(ctx, w.b.channel)
			if !w.install(ps) {
				return
			}
		}
		msg, err := ps.ReceiveTimeout(ctx, pingInterval)
		if err != nil {
			if w.isClosed() {
				return
			}
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				silent++
				if silent == 1 {
					_ = ps.Ping(ctx)
					continue
				}
				// The ping went unanswered: start over on a new connection.
				w.setState(connecting)
				_ = ps.Close()
				ps, silent = nil, 0
				continue
			}
			// go-redis reconnects (and resubscribes) on the next receive.
			w.setState(failing)
			fails++
			if !w.sleep(min(time.Duration(fails)*50*time.Millisecond, maxResubscribeBackoff)) {
				return
			}
			continue
		}
		silent, fails = 0, 0
		switch m := msg.(type) {
		case *redis.Message:
			w.onMessage(m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				w.setState(ready)
				w.wakeAll()
			}
		}
	}
}

func (w *watcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == closed
}

// sleep pauses for d; false means the watcher was closed meanwhile.
func (w *watcher) sleep(d time.Duration) bool {
	w.mu.Lock()
	changed := w.changed
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return !w.isClosed()
		case <-changed:
			if w.isClosed() {
				return false
			}
			w.mu.Lock()
			changed = w.changed
			w.mu.Unlock()
		}
	}
}

// close stops the subscription and waits for its goroutine, then wakes every
// waiter so it attempts at once and goes on by polling.
func (w *watcher) close() {
	w.mu.Lock()
	started := w.state != idle
	if w.state == closed {
		w.mu.Unlock()
		return
	}
	w.setStateLocked(closed)
	w.state = closed
	ps := w.ps
	w.mu.Unlock()
	if !started {
		return
	}
	if ps != nil {
		_ = ps.Close()
	}
	<-w.done
	w.wakeAll()
}
