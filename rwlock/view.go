package rwlock

import (
	"context"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// A view is one mode of a Backend as a driver.Backend, for a lock.Manager. It
// is a driver.ServerQueue, so the Manager keeps no queue of its own: every
// waiting reader attempts when woken (they may all get in together), and
// the writers' view learns which owners wait, which is what turns their
// failed attempts into intents.
type view struct {
	b       Backend
	watcher ReleaseWatcher // b's, or nil
	mode    Mode

	mu      sync.Mutex
	waiting map[string]*waiting // by owner: the Acquire calls that may wait; guarded by mu
	// writers queues, by name, the writers of this Locker that wait, in
	// arrival order; only the first attempts, so a release wakes one
	// attempt of this Locker's, not a herd. Guarded by mu.
	writers waitq.Queue[*waiting]
}

// waiting is one Acquire that may wait. Its watch of the backend starts
// after its first failed attempt, not before the first attempt as the
// Manager asks: most attempts succeed at once and need none.
type waiting struct {
	name   string
	ctx    context.Context // the Acquire's
	wake   waitq.Wake      // what the Manager waits on
	stop   func()          // ends the backend's watch; nil until it starts
	intent bool            // a writer's failed attempt may have recorded an intent
}

var (
	_ driver.Backend         = (*view)(nil)
	_ driver.ServerQueue     = (*view)(nil)
	_ driver.BoundedAcquirer = boundedView{}
	_ driver.BoundedRenewer  = boundedView{}
	_ driver.ServerQueue     = boundedView{}
)

// newView returns mode's view of b: a driver.BoundedAcquirer and
// driver.BoundedRenewer too when b is Bounded.
func newView(b Backend, mode Mode) driver.Backend {
	watcher, _ := b.(ReleaseWatcher)
	v := &view{b: b, watcher: watcher, mode: mode, waiting: map[string]*waiting{}}
	if bounded, ok := b.(Bounded); ok {
		return boundedView{v, bounded}
	}
	return v
}

// A boundedView is the view of a Bounded backend, whose acquisitions and
// renewals vouch for what Certain says.
type boundedView struct {
	*view
	bounded Bounded
}

func (v boundedView) TryAcquirePartial(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	sent := time.Now()
	token, left, err := v.TryAcquire(ctx, name, owner, ttl)
	if err != nil {
		return 0, 0, left, err
	}
	return token, v.bounded.Certain(sent, ttl), 0, nil
}

func (v boundedView) RenewPartial(ctx context.Context, name, owner string, ttl time.Duration) (time.Duration, error) {
	sent := time.Now()
	if err := v.Renew(ctx, name, owner, ttl); err != nil {
		return 0, err
	}
	return v.bounded.Certain(sent, ttl), nil
}

// withdrawTimeout bounds the withdrawal of a writer's intent when it stops
// waiting; a withdrawal that fails leaves the intent to end after IntentTTL.
const withdrawTimeout = time.Second

func (v *view) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	v.mu.Lock()
	w := v.waiting[owner]
	behind := w != nil && v.mode == Write && v.writers.Behind(name, w)
	v.mu.Unlock()
	if behind {
		// A writer of this Locker waits longer, and its intent already
		// keeps readers out: it attempts first, and wakes us when it
		// leaves.
		v.startWatch(w)
		return 0, 0, lock.ErrNotAcquired
	}
	intent := w != nil && v.mode == Write
	token, left, err := v.b.TryAcquire(ctx, name, owner, v.mode, ttl, intent)
	if w == nil {
		return token, left, err
	}
	v.mu.Lock()
	if intent {
		// Any failure may have recorded the intent (a transient error
		// may come after the server applied the attempt).
		w.intent = err != nil
	}
	v.mu.Unlock()
	if err != nil {
		v.startWatch(w)
	}
	return token, left, err
}

// startWatch starts w's watch of the backend, unless it has one or the
// backend cannot watch, and wakes w once, so that its Acquire attempts
// again at once: a release between the attempt that failed and the watch
// is not missed. If the watch cannot start, the Manager's poll goes on
// alone.
func (v *view) startWatch(w *waiting) {
	v.mu.Lock()
	start := w.stop == nil && v.watcher != nil
	v.mu.Unlock()
	if !start {
		return
	}
	ch, stop, err := v.watcher.WatchRelease(w.ctx, w.name)
	if err != nil {
		stop = func() {}
	} else {
		var relay sync.WaitGroup
		quit := make(chan struct{})
		relay.Go(func() {
			for {
				select {
				case <-ch:
					w.wake.Signal()
				case <-quit:
					return
				}
			}
		})
		inner := stop
		stop = func() { close(quit); relay.Wait(); inner() }
	}
	v.mu.Lock()
	w.stop = stop
	v.mu.Unlock()
	if err == nil {
		w.wake.Signal()
	}
}

func (v *view) Renew(ctx context.Context, name, owner string, ttl time.Duration) error {
	return v.b.Renew(ctx, name, owner, v.mode, ttl)
}

func (v *view) Release(ctx context.Context, name, owner string) error {
	return v.b.Release(ctx, name, owner, v.mode)
}

// WatchReleaseOwner is called by the Manager before the first attempt of an
// Acquire that may wait, and stop when it returns. It marks owner as one
// that waits (for a writer, its failed attempts then record its intent),
// and stop withdraws the intent unless the last attempt got in.
func (v *view) WatchReleaseOwner(ctx context.Context, name, owner string) (<-chan struct{}, func(), error) {
	w := &waiting{name: name, ctx: ctx, wake: waitq.NewWake()}
	v.mu.Lock()
	v.waiting[owner] = w
	if v.mode == Write {
		v.writers.Join(name, w)
	}
	v.mu.Unlock()
	var wake <-chan struct{} = w.wake
	if v.watcher == nil {
		wake = nil // the Manager then polls often, not as a safety net
	}
	return wake, func() {
		v.mu.Lock()
		delete(v.waiting, owner)
		stop, recorded := w.stop, w.intent
		if next, ok := v.writers.Leave(name, w); ok {
			next.wake.Signal() // the next writer's turn
		}
		v.mu.Unlock()
		if recorded {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
			_ = v.b.Withdraw(wctx, name, owner)
			cancel()
		}
		if stop != nil {
			stop()
		}
	}, nil
}
