package lock

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/lock/driver"
)

// WatchHolder watches key for changes of its holder, for those who follow a
// lock without taking it (an election's observers). With a backend that is a
// driver.HolderWatcher every change is signalled and complete is true. With one
// that only hints at releases (driver.ReleaseWatcher) the channel is signalled on
// releases, and complete is false: a new holder after an expiry or a free
// lock goes unsignalled, so the watcher must also poll. Otherwise it
// returns an error wrapping ErrUnsupported. Bad keys get an error wrapping
// ErrInvalid, and no server is touched.
func (m *Manager) WatchHolder(ctx context.Context, key string) (changes <-chan struct{}, stop func(), complete bool, err error) {
	if err := CheckKey(key); err != nil {
		return nil, nil, false, err
	}
	switch w := m.backend.(type) {
	case driver.HolderWatcher:
		ch, stop, err := w.WatchHolder(ctx, key)
		return ch, stop, err == nil, err
	case driver.ReleaseWatcher:
		if _, queued := m.backend.(driver.ServerQueue); !queued {
			ch, stop, err := w.WatchRelease(ctx, key)
			return ch, stop, false, err
		}
	}
	return nil, nil, false, fmt.Errorf("%w: watching a lock's holder", ErrUnsupported)
}
