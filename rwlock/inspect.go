package rwlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// Info is what an operator sees of one name's read-write lock.
type Info struct {
	Name string
	// Writer is the exclusive holder, nil if none.
	Writer *Holder
	// Readers are the shared holders, in no particular order.
	Readers []Holder
	// WritersWaiting is how many writers' intents live: writers that wait
	// and keep new readers out.
	WritersWaiting int
	// Token is the last fencing token issued for the name, 0 if the
	// backend no longer knows it.
	Token uint64
}

// Held reports whether anyone holds the name.
func (i Info) Held() bool { return i.Writer != nil || len(i.Readers) > 0 }

// A Holder is one holder of a name.
type Holder struct {
	// Label is the holder label (lock.WithHolder), "" without one.
	Label string
	// Token is the holder's fencing token.
	Token uint64
	// TimeLeft is how long the server keeps the hold unless it is renewed
	// or released, or lock.Unknown where the backend cannot tell
	// (ZooKeeper: a hold lives as long as its holder's session).
	TimeLeft time.Duration
}

// An Inspector is a Backend that can tell who holds a name. Owners are as
// the Backend stored them; Inspect turns them into labels.
type Inspector interface {
	// InspectRW returns name's holders and waiting writers.
	InspectRW(ctx context.Context, name string) (Info, error)
}

// ErrUnsupported is lock.ErrUnsupported: Inspect returns it for a backend
// that is not an Inspector.
var ErrUnsupported = lock.ErrUnsupported

// Inspect returns who holds name on l, in which mode, with which tokens
// and for how long still, and how many writers wait. Errors: one wrapping
// lock.ErrInvalid for a bad name (nothing is read), lock.ErrUnsupported if
// l's backend is not an Inspector, or the backend's error.
func (l *Locker) Inspect(ctx context.Context, name string) (Info, error) {
	if err := lock.CheckKey(name); err != nil {
		return Info{}, err
	}
	in, ok := l.b.(Inspector)
	if !ok {
		return Info{}, fmt.Errorf("%w: rwlock inspect", ErrUnsupported)
	}
	info, err := in.InspectRW(ctx, name)
	if err != nil {
		if errors.Is(err, lock.ErrInvalid) {
			return info, err
		}
		return info, fmt.Errorf("rwlock: inspect: %w", err)
	}
	info.Name = name
	if info.Writer != nil {
		info.Writer.Label = label(info.Writer.Label)
	}
	for i := range info.Readers {
		info.Readers[i].Label = label(info.Readers[i].Label)
	}
	return info, nil
}

// label returns the holder label stored in owner.
func label(owner string) string {
	if _, l, ok := lock.ParseOwner(owner); ok {
		return l
	}
	return owner
}
