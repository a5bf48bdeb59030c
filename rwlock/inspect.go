package rwlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Holding returns the holder whose fencing token is token and whether it
// is the writer; ok is false if no holder has it.
func (i Info) Holding(token uint64) (h Holder, writer, ok bool) {
	if i.Writer != nil && i.Writer.Token == token {
		return *i.Writer, true, true
	}
	for _, r := range i.Readers {
		if r.Token == token {
			return r, false, true
		}
	}
	return Holder{}, false, false
}

// HolderOf inspects name through in and returns its holder whose fencing
// token is token and whether it is the writer: where a Breaker's BreakRW
// starts. It returns an error wrapping lock.ErrNotHeld if no holder of name
// has token, or in's error.
func HolderOf(ctx context.Context, in Inspector, name string, token uint64) (h Holder, writer bool, err error) {
	info, err := in.InspectRW(ctx, name)
	if err != nil {
		return Holder{}, false, err
	}
	h, writer, ok := info.Holding(token)
	if !ok {
		return Holder{}, false, fmt.Errorf("%w: rwlock: no holder of %q has token %d", lock.ErrNotHeld, name, token)
	}
	return h, writer, nil
}

// ModeOf returns the mode of a writer (true) or a reader (false).
func ModeOf(writer bool) Mode {
	if writer {
		return Write
	}
	return Read
}

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

// A Lister is a Backend that can list the names of its read-write locks;
// callers use Locker.List.
type Lister interface {
	// ListRW returns at most limit names starting with prefix whose
	// read-write lock may be held, from where cursor (from an earlier
	// page, "" at first) ended, and the cursor of the next page, "" when
	// the listing is complete. It returns an error wrapping lock.ErrInvalid
	// for a cursor it did not issue.
	ListRW(ctx context.Context, prefix string, limit int, cursor string) (names []string, next string, err error)
}

// A Breaker is a Backend that can end any holder's hold; callers use
// Locker.Break.
type Breaker interface {
	// BreakRW ends the hold on name whose fencing token is token, as its
	// holder's release would (waking waiters), and returns the holder as
	// it was (its Label the stored owner, as InspectRW's) and whether it
	// was the writer. It returns an error wrapping lock.ErrNotHeld if no
	// live holder of name has that token.
	BreakRW(ctx context.Context, name string, token uint64) (h Holder, writer bool, err error)
}

// A Page is one page of List's answer.
type Page struct {
	// RWLocks are the held read-write locks, by name where the backend
	// orders them.
	RWLocks []Info
	// Cursor resumes the listing; "" when it is complete. A page may be
	// short, or empty, and still have one.
	Cursor string
}

// List returns at most limit (1 to lock.MaxListLimit) held read-write locks
// whose names start with prefix, and the cursor of the next page (pass ""
// at first). Errors: one wrapping lock.ErrInvalid for a limit out of range,
// a prefix too long or a cursor l did not issue, lock.ErrUnsupported if the
// backend cannot list, or the backend's error.
func (l *Locker) List(ctx context.Context, prefix string, limit int, cursor string) (Page, error) {
	if err := lock.CheckListing(prefix, limit); err != nil {
		return Page{}, err
	}
	ls, ok := l.b.(Lister)
	if !ok {
		return Page{}, fmt.Errorf("%w: list read-write locks", ErrUnsupported)
	}
	names, next, err := ls.ListRW(ctx, prefix, limit, cursor)
	if err != nil {
		return Page{}, fmt.Errorf("rwlock: list: %w", err)
	}
	page := Page{Cursor: next}
	for _, n := range names {
		in, err := l.Inspect(ctx, n)
		if err != nil {
			return page, err
		}
		if in.Held() {
			page.RWLocks = append(page.RWLocks, in)
		}
	}
	return page, nil
}

// Break ends the hold on name whose fencing token is token, whoever holds
// it: the writer or one reader. Waiters are woken as by a release; the
// broken holder learns at its next renewal at the latest (Done closes with
// lock.ErrLeaseLost), and every later token of the name is higher, so a
// fenced resource refuses the broken holder's writes. who names the
// operator who asked (required; the rules of lock.WithHolder apply); the
// break is logged to log (slog.Default() if nil) at Warn with who, the name,
// the holder's label, mode and token. It returns the holder as it was and
// whether it was the writer. Errors: one wrapping lock.ErrInvalid for a bad
// name or who (nothing is changed), lock.ErrNotHeld if no live holder has
// token, lock.ErrUnsupported if the backend cannot break, or the backend's
// error.
func (l *Locker) Break(ctx context.Context, name string, token uint64, who string, log *slog.Logger) (Holder, bool, error) {
	if err := lock.CheckKey(name); err != nil {
		return Holder{}, false, err
	}
	if err := lock.CheckAsker(who); err != nil {
		return Holder{}, false, err
	}
	br, ok := l.b.(Breaker)
	if !ok {
		return Holder{}, false, fmt.Errorf("%w: break a read-write lock's holder", ErrUnsupported)
	}
	h, writer, err := br.BreakRW(ctx, name, token)
	if err != nil {
		return h, writer, err
	}
	h.Label = label(h.Label)
	if log == nil {
		log = slog.Default()
	}
	mode := "reader"
	if writer {
		mode = "writer"
	}
	log.LogAttrs(ctx, slog.LevelWarn, "read-write lock holder broken",
		slog.String("by", who), slog.String("name", name), slog.String("holder", h.Label),
		slog.String("mode", mode), slog.Uint64("token", h.Token))
	return h, writer, nil
}
