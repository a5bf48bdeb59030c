package redisnode

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/waitq"
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

// A waiter is one watch of a key: a waiting Acquire's, or a caller's of
// WatchReleaseFunc.
type waiter struct {
	key    string
	wake   waitq.Wake // nil if notify is set
	notify func()     // called instead of a signal of wake, under watcher.mu
}

// watcher is a Locker's one pub/sub subscription, shared by all its waiters.
// A release message wakes every waiter of its key; the lock.Manager lets only
// the longest of them attempt.
type watcher struct {
	b *Node

	mu      sync.Mutex
	state   subState                        // guarded by mu
	ps      *redis.PubSub                   // guarded by mu
	changed chan struct{}                   // closed on every state change; guarded by mu
	keys    map[string]map[*waiter]struct{} // by key; guarded by mu
	nkeys   atomic.Int64                    // len(keys), read without mu
	done    chan struct{}                   // closed when the subscription goroutine ends
}

func newWatcher(b *Node) *watcher {
	return &watcher{
		b:       b,
		changed: make(chan struct{}),
		keys:    make(map[string]map[*waiter]struct{}),
		done:    make(chan struct{}),
	}
}

// watch watches key for a waiting Acquire. The first call starts the
// subscription and waits up to subscribeWait (or until ctx is done) for it
// to be confirmed, so that no release after the first attempt goes unheard.
// If the subscription is down, the Acquire falls back on the Manager's poll.
func (w *watcher) watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	wt := &waiter{key: key, wake: waitq.NewWake()}
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

// join adds wt, starting the subscription if nobody has waited yet. If the
// subscription is not confirmed yet it returns a channel closed when its
// state next changes.
func (w *watcher) join(wt *waiter) (subscribing <-chan struct{}, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == closed {
		return nil, errClosed
	}
	if w.state == idle {
		w.setStateLocked(connecting)
		go w.run()
	}
	set := w.keys[wt.key]
	if set == nil {
		set = make(map[*waiter]struct{})
		w.keys[wt.key] = set
		w.nkeys.Add(1)
	}
	set[wt] = struct{}{}
	if w.state == connecting {
		return w.changed, nil
	}
	return nil, nil
}

// leave removes wt.
func (w *watcher) leave(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.keys[wt.key]
	delete(set, wt)
	if _, ok := w.keys[wt.key]; ok && len(set) == 0 {
		delete(w.keys, wt.key)
		w.nkeys.Add(-1)
	}
}

// released wakes the waiters of key.
func (w *watcher) released(key string) {
	if w.nkeys.Load() == 0 {
		return
	}
	w.mu.Lock()
	for wt := range w.keys[key] {
		signal(wt)
	}
	w.mu.Unlock()
}

// wakeAll wakes every waiter, after the subscription was (re)established
// and releases may have gone unheard.
func (w *watcher) wakeAll() {
	w.mu.Lock()
	for _, set := range w.keys {
		for wt := range set {
			signal(wt)
		}
	}
	w.mu.Unlock()
}

func signal(wt *waiter) {
	if wt.notify != nil {
		wt.notify()
		return
	}
	wt.wake.Signal()
}

// onMessage handles a release message: the releasing Locker's id, then the
// lock's Redis key. A release that carries this Locker's id was handed to
// its waiter directly (ReleaseHandoff).
func (w *watcher) onMessage(payload string) {
	const idLen = 16
	if len(payload) <= idLen || payload[:idLen] == w.b.id {
		return
	}
	if key, ok := userKey(w.b.prefix, payload[idLen:]); ok {
		// Redis delivers a message to its subscribers one after the
		// other, always in the order they subscribed: the Locker that
		// subscribed first would win every race for a released key. A
		// random delay under releaseSpread evens the odds.
		time.AfterFunc(rand.N(releaseSpread), func() { w.released(key) })
	}
}

// releaseSpread bounds the random delay before a release message wakes this
// Locker's waiters: above the spread of one message's delivery to the
// subscribers of one server, small beside a hand-off's round trips.
const releaseSpread = time.Millisecond

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
	sub := subscription{w: w}
	defer sub.close()
	for {
		if sub.ps == nil && !sub.start() {
			return
		}
		msg, err := sub.ps.ReceiveTimeout(context.Background(), pingInterval)
		if err != nil {
			if w.isClosed() || !sub.failed(err) {
				return
			}
			continue
		}
		sub.silent, sub.fails = 0, 0
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

// A subscription is the watcher's pub/sub connection as its goroutine
// keeps it: silent counts receive timeouts in a row, fails other errors.
type subscription struct {
	w      *watcher
	ps     *redis.PubSub // nil until started, and after a silent connection is dropped
	silent int
	fails  int
}

// start subscribes on a new connection; false if the watcher is closed.
func (s *subscription) start() bool {
	s.ps = s.w.b.client.Subscribe(context.Background(), s.w.b.channel)
	return s.w.install(s.ps)
}

// failed handles a receive's error: a first timeout sends a ping, a second
// drops the connection for a new one, and any other error waits a backoff
// while go-redis reconnects (and resubscribes) on the next receive. It
// returns false if the watcher closed meanwhile.
func (s *subscription) failed(err error) bool {
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		s.silent++
		if s.silent == 1 {
			_ = s.ps.Ping(context.Background())
			return true
		}
		// The ping went unanswered: start over on a new connection.
		s.w.setState(connecting)
		s.close()
		s.silent = 0
		return true
	}
	s.w.setState(failing)
	s.fails++
	return s.w.sleep(min(time.Duration(s.fails)*50*time.Millisecond, maxResubscribeBackoff))
}

// close closes the connection, if any.
func (s *subscription) close() {
	if s.ps != nil {
		_ = s.ps.Close()
		s.ps = nil
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
