package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrUnsupported is returned by Inspect, List and Break for a Locker whose
// backend cannot do what was asked.
var ErrUnsupported = errors.New("lock: not supported by this backend")

// Unknown is the value of LockInfo.TimeLeft and LockInfo.Waiters when the
// backend cannot tell.
const Unknown = -1

// MaxListLimit is the most locks one List call returns.
const MaxListLimit = 1000

// LockInfo is what an operator sees of one lock: who holds it, with which
// token, for how long still, and who waits.
type LockInfo struct {
	Key  string
	Held bool
	// Holder is the holder's label (WithHolder), "" without one. A holder
	// that is not latchkey's shows what that client stored: nothing for
	// etcdctl lock and etcd's concurrency.Mutex, the IP address for Curator,
	// the identifier for kazoo.
	Holder string
	// Entry is the server's own record of the holder, where it has one apart
	// from the key: the etcd key or the ZooKeeper node path, which etcdctl
	// and zkCli show. Holders that are not latchkey's (etcdctl lock, the
	// Mutex, Curator, kazoo) are found and shown the same way.
	Entry string
	// Token is the holder's fencing token, 0 if the backend no longer knows
	// it (a Redis counter that outlived its retention).
	Token uint64
	// AcquiredAt is when the holder took the lock, by the server's clock;
	// the zero Time where the backend does not record it (Redis, SQL,
	// etcd).
	AcquiredAt time.Time
	// TimeLeft is how long the server keeps the lock unless it is renewed
	// or released, or Unknown (ZooKeeper: a lock lives as long as its
	// holder's session).
	TimeLeft time.Duration
	// Waiters is how many contenders queue behind the holder, or Unknown
	// where the backend cannot count them (Redis, SQL: Waiting then
	// tells whether anyone waits, where known).
	Waiters int
	// Waiting reports that someone waited for the lock lately: Waiters > 0,
	// or, on Redis, the flag a failed attempt leaves for 10 s.
	Waiting bool
}

// A LockPage is one page of List's answer.
type LockPage struct {
	Locks []LockInfo // held locks, by key where the backend orders them
	// Cursor resumes the listing where this page ended; "" when the listing
	// is complete. A page may hold fewer than the limit and still have a
	// Cursor: a backend stops early to stay bounded in time.
	Cursor string
}

// An Inspector is a Locker that can tell who holds a key. Backends
// implement it on their Locker; callers use Inspect.
type Inspector interface {
	// InspectLock returns key's lock; Held is false if nobody holds it.
	InspectLock(ctx context.Context, key string) (LockInfo, error)
}

// A Lister is a Locker that can list its held locks; callers use List.
type Lister interface {
	// ListLocks returns at most limit held locks whose keys start with
	// prefix, from where cursor (from an earlier page, "" at first) ended.
	// It returns an error wrapping ErrInvalid for a cursor it did not issue.
	ListLocks(ctx context.Context, prefix string, limit int, cursor string) (LockPage, error)
}

// A Breaker is a Locker that can delete a lock whoever holds it; callers use
// Break.
type Breaker interface {
	// BreakLock deletes key's lock, waking waiters as a release would, and
	// returns the lock as it was. The broken holder's next renewal finds the
	// lock not its own (ErrNotHeld) and its Done closes; the fencing counter
	// is kept, so the next holder's token is higher. It returns an error
	// wrapping ErrNotHeld if nobody held key.
	BreakLock(ctx context.Context, key string) (LockInfo, error)
}

// Inspect returns key's lock on l: who holds it, its token and time left,
// and its waiters, with Held false if it is free. Errors: one wrapping
// ErrInvalid for a bad key (nothing is read), ErrUnsupported if l is not an
// Inspector, or the backend's error.
func Inspect(ctx context.Context, l Locker, key string) (LockInfo, error) {
	if err := CheckKey(key); err != nil {
		return LockInfo{}, err
	}
	in, ok := l.(Inspector)
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: inspect", ErrUnsupported)
	}
	return in.InspectLock(ctx, key)
}

// List returns at most limit (1 to MaxListLimit) held locks on l whose keys
// start with prefix ("" for all), and a cursor to pass back for the next
// page ("" at first, and in the last page). Each call is bounded in work and
// time: a page may be short, or empty, and still have a Cursor. A lock held
// throughout a listing is listed, on some backends perhaps twice (Redis's
// SCAN repeats keys when the server resizes its table). Errors: one
// wrapping ErrInvalid for a limit out of range, a prefix longer than
// MaxKeyLen or a cursor l did not issue (nothing is read), ErrUnsupported if
// l is not a Lister, or the backend's error.
func List(ctx context.Context, l Locker, prefix string, limit int, cursor string) (LockPage, error) {
	if err := CheckListing(prefix, limit); err != nil {
		return LockPage{}, err
	}
	ls, ok := l.(Lister)
	if !ok {
		return LockPage{}, fmt.Errorf("%w: list", ErrUnsupported)
	}
	return ls.ListLocks(ctx, prefix, limit, cursor)
}

// CheckListing checks a listing's prefix and page limit (1 to
// MaxListLimit), as List, rwlock's and semaphore's List do. Its error wraps
// ErrInvalid.
func CheckListing(prefix string, limit int) error {
	switch {
	case limit < 1 || limit > MaxListLimit:
		return fmt.Errorf("%w: list limit %d outside [1, %d]", ErrInvalid, limit, MaxListLimit)
	case len(prefix) > MaxKeyLen:
		return fmt.Errorf("%w: prefix is %d bytes, longer than %d", ErrInvalid, len(prefix), MaxKeyLen)
	}
	return nil
}

// CheckAsker checks who, the operator a break is logged as: required, and
// held to the rules of WithHolder. Its error wraps ErrInvalid.
func CheckAsker(who string) error {
	if who == "" {
		return fmt.Errorf("%w: break: nobody named as asking", ErrInvalid)
	}
	if err := validateHolder(who); err != nil {
		return fmt.Errorf("break: who asked: %w", err)
	}
	return nil
}

// Break deletes key's lock on l whoever holds it, so the next waiter gets
// it, and returns the lock as it was. The broken holder learns at its next
// renewal at the latest (its Done closes with ErrLeaseLost), and every later
// holder's fencing token is higher than the broken one's, so a fenced
// resource refuses the broken holder's writes. who names the operator who
// asked (required; the rules of WithHolder apply). The break is logged to
// log (slog.Default() if nil) at Warn with who, the key and the broken
// holder's label and token. Errors: one wrapping ErrInvalid for a bad key or
// who (nothing is changed), one wrapping ErrNotHeld if nobody held key,
// ErrUnsupported if l is not a Breaker, or the backend's error.
func Break(ctx context.Context, l Locker, key, who string, log *slog.Logger) (LockInfo, error) {
	if err := CheckKey(key); err != nil {
		return LockInfo{}, err
	}
	if err := CheckAsker(who); err != nil {
		return LockInfo{}, err
	}
	br, ok := l.(Breaker)
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: break", ErrUnsupported)
	}
	info, err := br.BreakLock(ctx, key)
	if err != nil {
		return info, err
	}
	if log == nil {
		log = slog.Default()
	}
	log.LogAttrs(ctx, slog.LevelWarn, "lock broken",
		slog.String("by", who), slog.String("key", key),
		slog.String("holder", info.Holder), slog.String("entry", info.Entry),
		slog.Uint64("token", info.Token))
	return info, nil
}
