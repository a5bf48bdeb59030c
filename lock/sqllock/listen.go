package sqllock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkey-go/latchkey/internal/waitq"
)

// listener keeps one connection LISTENing for release notifications and
// wakes the waiters of the released key. It connects with the first watch,
// reconnects when the connection drops, and lets the connection go once
// nobody has watched for listenIdle, until the next watch or close.
type listener struct {
	conns     connSource
	channel   string
	idleAfter time.Duration   // listenIdle when the listener was made
	ctx       context.Context // the listener's life, until close
	cancel    context.CancelFunc

	mu        sync.Mutex
	sess      *session       // the connection's loop, nil while idle; guarded by mu
	watching  int            // watches not yet stopped; guarded by mu
	idle      *time.Timer    // ends sess once nobody watches; guarded by mu
	locker    string         // the Locker's id, once one of its Acquire calls waits; guarded by mu
	waiters   waitq.Watchers // waiting Acquire calls, by key hash
	observers waitq.Watchers // those who only watch, by key hash
	sessions  sync.WaitGroup // running loops
}

// A session is one run of the listener's connection loop.
type session struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed while LISTEN is active; guarded by the listener's mu
}

// readyWait bounds how long a new waiter waits for the LISTEN connection
// before it goes ahead and relies on polling.
const readyWait = 2 * time.Second

// listenIdle is how long the LISTEN connection outlives the last watch: a
// Locker nobody waits on holds no connection, and one whose waits follow
// each other keeps its one.
var listenIdle = 30 * time.Second

func newListener(conns connSource, channel string) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{conns: conns, channel: channel, idleAfter: listenIdle, ctx: ctx, cancel: cancel}
}

// WatchRelease implements driver.ReleaseWatcher for those who only watch:
// every release of key that notifies wakes them.
func (ln *listener) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return ln.watch(ctx, key, "")
}

// watch watches key's releases for a waiting Acquire of Locker locker (woken
// only by releases promised to it or to nobody), or for an observer (locker
// ""). It returns once the LISTEN is active (or after readyWait), so a
// release after it returns is not missed.
func (ln *listener) watch(ctx context.Context, key, locker string) (<-chan struct{}, func(), error) {
	ln.mu.Lock()
	if ln.ctx.Err() != nil {
		ln.mu.Unlock()
		return nil, nil, ln.ctx.Err()
	}
	ws := &ln.observers
	if locker != "" {
		ln.locker, ws = locker, &ln.waiters
	}
	ch, stop := ws.Watch(keyHash(key))
	ln.watching++
	if ln.idle != nil {
		ln.idle.Stop()
	}
	if ln.sess == nil {
		ln.startLocked()
	}
	ready := ln.sess.ready
	ln.mu.Unlock()
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	}
	return ch, func() {
		stop()
		ln.unwatch()
	}, nil
}

// unwatch counts a stopped watch; after the last, the connection goes once
// listenIdle passes without another.
func (ln *listener) unwatch() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.watching--; ln.watching > 0 || ln.sess == nil {
		return
	}
	if ln.idle == nil {
		ln.idle = time.AfterFunc(ln.idleAfter, ln.stopIdle)
	} else {
		ln.idle.Reset(ln.idleAfter)
	}
}

// stopIdle ends the session if nobody has watched since the idle timer was set.
func (ln *listener) stopIdle() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.watching > 0 || ln.sess == nil {
		return
	}
	ln.sess.cancel()
	ln.sess = nil
}

// startLocked starts a session.
func (ln *listener) startLocked() {
	ctx, cancel := context.WithCancel(ln.ctx)
	s := &session{cancel: cancel, ready: make(chan struct{})}
	ln.sess = s
	ln.sessions.Add(1)
	go func() {
		defer ln.sessions.Done()
		ln.run(ctx, s)
	}()
}

// run keeps s's connection LISTENing until ctx ends.
func (ln *listener) run(ctx context.Context, s *session) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if err := ln.listen(ctx, s); err != nil && ctx.Err() == nil {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (ln *listener) listen(ctx context.Context, s *session) error {
	return ln.conns(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ln.channel}.Sanitize()); err != nil {
			return err
		}
		ln.mu.Lock()
		close(s.ready)
		ln.mu.Unlock()
		ln.waiters.NotifyAll() // releases while we were not listening went unheard
		ln.observers.NotifyAll()
		defer func() {
			ln.mu.Lock()
			s.ready = make(chan struct{})
			ln.mu.Unlock()
		}()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			ln.notify(n.Payload)
		}
	})
}

// notify wakes the watchers of a release: the payload is the key's hash,
// then, if the release promised the lock to a Locker, a space and its id.
// Observers always wake, waiting Acquire calls only if the promise is to
// their Locker or to nobody.
func (ln *listener) notify(payload string) {
	hash, promised, _ := strings.Cut(payload, " ")
	ln.observers.Notify(hash)
	ln.mu.Lock()
	mine := promised == "" || promised == ln.locker
	ln.mu.Unlock()
	if mine {
		ln.waiters.Notify(hash)
	}
}

func (ln *listener) close() {
	ln.mu.Lock()
	ln.cancel()
	ln.sess = nil
	if ln.idle != nil {
		ln.idle.Stop()
	}
	ln.mu.Unlock()
	ln.sessions.Wait()
}
