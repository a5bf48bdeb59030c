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
// wakes the waiters of the released key. It starts with the first waiter and
// runs until close, reconnecting when the connection drops.
type listener struct {
	conns   connSource
	channel string
	ctx     context.Context
	cancel  context.CancelFunc

	mu        sync.Mutex
	started   bool           // guarded by mu
	ready     chan struct{}  // closed while LISTEN is active; guarded by mu
	locker    string         // the Locker's id, once one of its Acquire calls waits; guarded by mu
	waiters   waitq.Watchers // waiting Acquire calls, by key hash
	observers waitq.Watchers // those who only watch, by key hash
	done      chan struct{}  // closed when run returns
}

// readyWait bounds how long a new waiter waits for the LISTEN connection
// before it goes ahead and relies on polling.
const readyWait = 2 * time.Second

func newListener(conns connSource, channel string) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		conns: conns, channel: channel, ctx: ctx, cancel: cancel,
		ready: make(chan struct{}),
		done:  make(chan struct{}),
	}
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
	if !ln.started {
		ln.started = true
		go ln.run()
	}
	ready := ln.ready
	ln.mu.Unlock()
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	}
	return ch, stop, nil
}

func (ln *listener) run() {
	defer close(ln.done)
	backoff := 50 * time.Millisecond
	for ln.ctx.Err() == nil {
		if err := ln.listen(); err != nil && ln.ctx.Err() == nil {
			select {
			case <-time.After(backoff):
			case <-ln.ctx.Done():
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// listen holds one LISTEN connection until it fails or the listener closes.
func (ln *listener) listen() error {
	return ln.conns(ln.ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ln.ctx, "LISTEN "+pgx.Identifier{ln.channel}.Sanitize()); err != nil {
			return err
		}
		ln.mu.Lock()
		close(ln.ready)
		ln.mu.Unlock()
		ln.waiters.NotifyAll() // releases while we were not listening went unheard
		ln.observers.NotifyAll()
		defer func() {
			ln.mu.Lock()
			ln.ready = make(chan struct{})
			ln.mu.Unlock()
		}()
		for {
			n, err := c.WaitForNotification(ln.ctx)
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
	started := ln.started
	ln.cancel()
	ln.mu.Unlock()
	if started {
		<-ln.done
	}
}
