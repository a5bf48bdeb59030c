package rwlock

import (
	"context"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// A view is one mode of a Backend as a lock.Backend, for a lock.Manager. It
// is a lock.OwnerWatcher, so the Manager keeps no queue of its own: every
// waiting reader attempts when woken (they may all get in together), and
// the writers' view learns which owners wait, which is what turns their
// failed attempts into intents.
type view struct {
	b    Backend
	mode Mode

	mu sync.Mutex
	// intents holds, by owner, the writers that wait; true once an attempt
	// of theirs failed, which recorded an intent that must be withdrawn if
	// they give up. Guarded by mu; nil in the readers' view.
	intents map[string]bool
}

var (
	_ lock.Backend      = (*view)(nil)
	_ lock.OwnerWatcher = (*view)(nil)
)

// withdrawTimeout bounds the withdrawal of a writer's intent when it stops
// waiting; a withdrawal that fails leaves the intent to end after IntentTTL.
const withdrawTimeout = time.Second

func (v *view) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	waits := v.waits(owner)
	token, left, err := v.b.TryAcquire(ctx, name, owner, v.mode, ttl, waits)
	if waits {
		v.mu.Lock()
		if _, ok := v.intents[owner]; ok {
			// Any failure may have recorded the intent (a transient error
			// may come after the server applied the attempt).
			v.intents[owner] = err != nil
		}
		v.mu.Unlock()
	}
	return token, left, err
}

// waits reports whether owner is a writer that waits.
func (v *view) waits(owner string) bool {
	if v.intents == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.intents[owner]
	return ok
}

func (v *view) Renew(ctx context.Context, name, owner string, ttl time.Duration) error {
	return v.b.Renew(ctx, name, owner, v.mode, ttl)
}

func (v *view) Release(ctx context.Context, name, owner string) error {
	return v.b.Release(ctx, name, owner, v.mode)
}

// WatchReleaseOwner is called by the Manager before the first attempt of an
// Acquire that may wait, and stop when it returns. For a writer it marks
// owner as waiting until then, and withdraws the intent its attempts
// recorded unless the last one got in. A watch that fails still marks the
// writer (the Manager then polls).
func (v *view) WatchReleaseOwner(ctx context.Context, name, owner string) (<-chan struct{}, func(), error) {
	wake, stop, err := v.b.WatchRelease(ctx, name)
	if err != nil {
		wake, stop = nil, func() {}
	}
	if v.intents == nil {
		return wake, stop, err
	}
	v.mu.Lock()
	v.intents[owner] = false
	v.mu.Unlock()
	return wake, func() {
		v.mu.Lock()
		recorded := v.intents[owner]
		delete(v.intents, owner)
		v.mu.Unlock()
		if recorded {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
			_ = v.b.Withdraw(wctx, name, owner)
			cancel()
		}
		stop()
	}, nil
}
