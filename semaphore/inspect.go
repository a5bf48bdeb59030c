package semaphore

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// Info is what an operator sees of one semaphore: its permit count and who
// holds which permits, with what token, for how long still.
type Info struct {
	Name string
	// Permits is N as the holders agreed on it; 0 when nobody holds a
	// permit (then any count may be used next).
	Permits int
	// Used is how many permits are held: the sum of the holders' Count.
	Used int
	// Holders are the live acquisitions, in the order they were taken
	// where the backend keeps it, else by token.
	Holders []HolderInfo
	// LastToken is the last fencing token issued for the name, 0 if the
	// backend does not know it.
	LastToken uint64
	// Waiting reports that someone waited for a permit lately, where the
	// backend can tell (Redis: the flag a failed attempt leaves for 10 s).
	Waiting bool
}

// HolderInfo is one live acquisition of a semaphore.
type HolderInfo struct {
	// Holder is the label the permit was taken with (lock.WithHolder), ""
	// without one.
	Holder string
	// Entry is the server's record of the holder where it has one apart
	// from the name (the etcd key, the ZooKeeper node), else "".
	Entry    string
	Token    uint64
	Count    int           // permits held
	TimeLeft time.Duration // lock.Unknown where the backend cannot tell
}

// An Inspector is a backend that can tell who holds a semaphore's permits;
// callers use Client.Inspect.
type Inspector interface {
	// InspectSemaphore returns name's semaphore, with no holders if nobody
	// holds a permit.
	InspectSemaphore(ctx context.Context, name string) (Info, error)
}

// Inspect returns name's semaphore as the backend sees it: N, the holders,
// their tokens and time left. Errors: one wrapping lock.ErrInvalid for a bad
// name (nothing is read), lock.ErrUnsupported if the backend cannot inspect,
// or the backend's error.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	in, ok := c.b.(Inspector)
	if !ok {
		return Info{}, fmt.Errorf("%w: inspect a semaphore", lock.ErrUnsupported)
	}
	return in.InspectSemaphore(ctx, name)
}

// Inspect returns the semaphore as Client.Inspect does.
func (s *Semaphore) Inspect(ctx context.Context) (Info, error) {
	return s.c.Inspect(ctx, s.name)
}
