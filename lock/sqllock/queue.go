package sqllock

import (
	"context"
	"sync"
	"time"
)

// On PostgreSQL through pgx, Lockers waiting for one key queue on the server,
// so that a release wakes one of them, not all. A waiting Acquire's
// attempts (those its Locker watches releases for) add the Locker to the
// key's queue, a row of <table>_queue that lives queuedFor ms and is
// renewed by the waiter's later attempts; its attempt that takes the lock
// removes it. A release of a row that another Locker's waiter marked
// (waitedMark) promises the lock for promisedFor to the Locker that has
// queued longest, and its NOTIFY names that Locker: only its waiters
// attempt, and every other Locker's attempt finds the lock taken until the
// promise ends. Without a live queued Locker the release notifies every
// Locker, as before there was a queue. A Locker whose last waiter for a key
// gives up takes itself out of the key's queue; one that dies leaves its
// row, which a release may promise the lock to: the lock then waits out
// the promise, at most once a release and only until the row's time ends.
const (
	queuedFor   = "4000"      // ms a queue row lives
	queueRenew  = "1500"      // renewed by an attempt once less than queuedFor minus this is left
	promisedFor = time.Second // how long a released lock waits for the Locker promised it
)

// queueTable is the PostgreSQL queue of Lockers waiting for each key.
const queueTable = `CREATE TABLE IF NOT EXISTS {table}_queue (
	key        TEXT NOT NULL,
	locker     TEXT NOT NULL,
	queued_us  BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (key, locker)
)`

// lockerIDLen is the length of a Locker's id: its owners' first characters
// (lock.Manager makes them one Manager's).
const lockerIDLen = 16

// lockerID returns the id of the Locker owner belongs to.
func lockerID(owner string) string { return owner[:min(len(owner), lockerIDLen)] }

// waiting records which of a Locker's owners are waiting Acquire calls, for
// which keys the Locker may stand in the server's queue, and which keys it
// released while promising them to another Locker.
type waiting struct {
	mu     sync.Mutex
	owners map[string]string     // a waiting owner -> its key; guarded by mu
	keys   map[string]*keyQueued // guarded by mu
	// promised holds, for keys this Locker released with a promise to
	// another Locker, when that promise ends; guarded by mu.
	promised deadlines
}

// keyQueued is a Locker's standing in one key's queue.
type keyQueued struct {
	watches int  // waiting Acquire calls
	queued  bool // an attempt of one of them may have queued the Locker
}

// join records that owner waits for key.
func (w *waiting) join(key, owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners == nil {
		w.owners, w.keys = make(map[string]string), make(map[string]*keyQueued)
	}
	w.owners[owner] = key
	if w.keys[key] == nil {
		w.keys[key] = &keyQueued{}
	}
	w.keys[key].watches++
}

// waits reports whether owner is a waiting Acquire's; w may be nil. If not,
// and owner's Locker released key with a promise to another Locker that
// has not ended, promised is what is left of it: every attempt of this
// Locker until then is refused (see the queue's doc), so it need not be
// sent. A waiting call still attempts: its attempt queues the Locker.
func (w *waiting) waits(key, owner string) (waits bool, promised time.Duration) {
	if w == nil {
		return false, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.owners[owner]; ok {
		return true, 0
	}
	return false, w.promised.left(key)
}

// promisedElsewhere records that this Locker released key with a promise
// to another Locker, sent at sent (the promise ends promisedFor after the
// release ran, so no earlier than this).
func (w *waiting) promisedElsewhere(key string, sent time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promised.set(key, sent.Add(promisedFor))
}

// attempted records what a waiting owner's attempt on key did to the queue:
// queued the Locker (or left it queued), or took it out.
func (w *waiting) attempted(key string, queued bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k := w.keys[key]; k != nil {
		k.queued = queued
	}
}

// leave records that owner no longer waits for key, and reports whether it
// was the Locker's last waiter for key while the Locker may stand in the
// key's queue.
func (w *waiting) leave(key, owner string) (dequeue bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.owners, owner)
	k := w.keys[key]
	if k == nil {
		return false
	}
	if k.watches--; k.watches > 0 {
		return false
	}
	delete(w.keys, key)
	return k.queued
}

// dequeueWait bounds the statement that takes a Locker out of a key's queue.
const dequeueWait = time.Second

// WatchReleaseFor implements driver.WaiterWatcher: owner's Acquire waits for
// key, so its attempts queue its Locker on the server, and only releases
// promised to its Locker (or to nobody) wake it. When the Locker's last
// waiter for key stops, the Locker leaves the key's queue.
func (w watchingBackend) WatchReleaseFor(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	ch, stop, err := w.listener.watch(ctx, key, lockerID(owner))
	if err != nil {
		return nil, nil, err
	}
	w.backend.waiting.join(key, owner)
	return ch, func() {
		stop()
		if w.backend.waiting.leave(key, owner) {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dequeueWait)
			defer cancel()
			_, _ = w.backend.db.Exec(dctx, w.backend.q.dequeue, key, lockerID(owner)) // a hint: the row's time ends it anyway
		}
	}, nil
}
