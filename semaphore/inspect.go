package semaphore

import (
	"context"
	"fmt"
	"log/slog"
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

// A Lister is a backend that can list the names of its semaphores; callers
// use Client.List.
type Lister interface {
	// ListSemaphores returns at most limit names starting with prefix
	// whose permits may be held, from where cursor (from an earlier page,
	// "" at first) ended, and the cursor of the next page, "" when the
	// listing is complete. It returns an error wrapping lock.ErrInvalid for
	// a cursor it did not issue.
	ListSemaphores(ctx context.Context, prefix string, limit int, cursor string) (names []string, next string, err error)
}

// A Breaker is a backend that can take back any holder's permits; callers
// use Client.Break.
type Breaker interface {
	// BreakPermits takes back the permits of name's holder whose fencing
	// token is token, as its release would (waking waiters), and returns
	// the holder as it was. It returns an error wrapping lock.ErrNotHeld if
	// no live holder of name has that token.
	BreakPermits(ctx context.Context, name string, token uint64) (HolderInfo, error)
}

// A Page is one page of List's answer.
type Page struct {
	// Semaphores are those with permits held, by name where the backend
	// orders them.
	Semaphores []Info
	// Cursor resumes the listing; "" when it is complete. A page may be
	// short, or empty, and still have one.
	Cursor string
}

// List returns at most limit (1 to lock.MaxListLimit) semaphores with
// permits held whose names start with prefix, and the cursor of the next
// page (pass "" at first). Errors: one wrapping lock.ErrInvalid for a limit
// out of range, a prefix too long or a cursor c did not issue,
// lock.ErrUnsupported if the backend cannot list, or the backend's error.
func (c *Client) List(ctx context.Context, prefix string, limit int, cursor string) (Page, error) {
	if err := lock.CheckListing(prefix, limit); err != nil {
		return Page{}, err
	}
	ls, ok := c.b.(Lister)
	if !ok {
		return Page{}, fmt.Errorf("%w: list semaphores", lock.ErrUnsupported)
	}
	names, next, err := ls.ListSemaphores(ctx, prefix, limit, cursor)
	if err != nil {
		return Page{}, fmt.Errorf("semaphore: list: %w", err)
	}
	page := Page{Cursor: next}
	for _, n := range names {
		in, err := c.Inspect(ctx, n)
		if err != nil {
			return page, err
		}
		if len(in.Holders) > 0 {
			page.Semaphores = append(page.Semaphores, in)
		}
	}
	return page, nil
}

// Break takes back the permits of name's holder whose fencing token is
// token, whoever holds them. Waiters are woken as by a release; the broken
// holder learns at its next renewal at the latest (Done closes with
// lock.ErrLeaseLost), and every later token of the name is higher, so a
// fenced resource refuses the broken holder's writes. who names the operator
// who asked (required; the rules of lock.WithHolder apply); the break is
// logged to log (slog.Default() if nil) at Warn with who, the name, the
// holder's label, its permits and token. Errors: one wrapping
// lock.ErrInvalid for a bad name or who (nothing is changed),
// lock.ErrNotHeld if no live holder has token, lock.ErrUnsupported if the
// backend cannot break, or the backend's error.
func (c *Client) Break(ctx context.Context, name string, token uint64, who string, log *slog.Logger) (HolderInfo, error) {
	if err := CheckName(name); err != nil {
		return HolderInfo{}, err
	}
	if err := lock.CheckAsker(who); err != nil {
		return HolderInfo{}, err
	}
	br, ok := c.b.(Breaker)
	if !ok {
		return HolderInfo{}, fmt.Errorf("%w: break a semaphore's holder", lock.ErrUnsupported)
	}
	h, err := br.BreakPermits(ctx, name, token)
	if err != nil {
		return h, err
	}
	if log == nil {
		log = slog.Default()
	}
	log.LogAttrs(ctx, slog.LevelWarn, "semaphore permits broken",
		slog.String("by", who), slog.String("name", name), slog.String("holder", h.Holder),
		slog.Int("permits", h.Count), slog.Uint64("token", h.Token))
	return h, nil
}
