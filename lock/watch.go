package lock

import (
	"context"
	"fmt"
)

// A HolderWatcher is a Backend that can tell its watchers that a key's
// holder may have changed: the lock was taken, released, expired, broken or
// relabeled (SetHolder). Signals may be spurious or coalesce; a watcher
// reads the lock again (Inspect) to learn what changed.
type HolderWatcher interface {
	// WatchHolder starts watching key. The returned channel receives a value
	// (it may be buffered and coalesce signals) after every change of key's
	// holder from the moment WatchHolder returns. stop releases the watch's
	// resources; it is called exactly once.
	WatchHolder(ctx context.Context, key string) (changes <-chan struct{}, stop func(), err error)
}

// WatchHolder watches key for changes of its holder, for those who follow a
// lock without taking it (an election's observers). With a backend that is a
// HolderWatcher every change is signalled and complete is true. With one
// that only hints at releases (ReleaseWatcher) the channel is signalled on
// releases, and complete is false: a new holder after an expiry or a free
// lock goes unsignalled, so the watcher must also poll. Otherwise it
// returns an error wrapping ErrUnsupported. Bad keys get an error wrapping
// ErrInvalid, and no server is touched.
func (m *Manager) WatchHolder(ctx context.Context, key string) (changes <-chan struct{}, stop func(), complete bool, err error) {
	if err := CheckKey(key); err != nil {
		return nil, nil, false, err
	}
	switch w := m.backend.(type) {
	case HolderWatcher:
		ch, stop, err := w.WatchHolder(ctx, key)
		return ch, stop, err == nil, err
	case ReleaseWatcher:
		if _, queued := m.backend.(OwnerWatcher); !queued {
			ch, stop, err := w.WatchRelease(ctx, key)
			return ch, stop, false, err
		}
	}
	return nil, nil, false, fmt.Errorf("%w: watching a lock's holder", ErrUnsupported)
}
