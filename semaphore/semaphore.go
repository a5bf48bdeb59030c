package semaphore

import (
	"context"
	"fmt"
	"io"

	"github.com/latchkey-go/latchkey/lock"
)

// A Client hands out permits of the semaphores on one backend. Its
// Semaphores share one lock.Manager, so the permits of all of them are
// renewed together (in one round trip per tick where the backend batches).
// All its methods are safe for concurrent use.
type Client struct {
	m *lock.Manager
	b Backend
}

// New returns a Client on b (each backend package's NewSemaphores
// constructs its own). It returns an error wrapping lock.ErrInvalid if b is
// nil.
func New(b Backend) (*Client, error) {
	if b == nil {
		return nil, fmt.Errorf("semaphore: %w: nil backend", lock.ErrInvalid)
	}
	m, err := lock.NewManager(newView(b))
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w", err)
	}
	return &Client{m: m, b: b}, nil
}

// Close closes the backend if it is an io.Closer (a subscription, a
// connection the Client opened). Permits still held are then no longer
// renewed and are lost; release them first.
func (c *Client) Close() error {
	if cl, ok := c.b.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// SetObserver makes o the lock.Observer of the permits acquired from now on
// (package metrics has one); nil turns observation off. Its events' Key is
// "N/k/name": the permit count, how many permits the acquisition takes, and
// the semaphore's name ("4/1/payment-provider").
func (c *Client) SetObserver(o lock.Observer) { c.m.SetObserver(o) }

// Semaphore returns name's semaphore with permits permits. It touches no
// server: the count is checked against the holders' at each Acquire. It
// returns an error wrapping lock.ErrInvalid for an empty or too long name
// or a count outside [1, MaxPermits].
func (c *Client) Semaphore(name string, permits int) (*Semaphore, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := checkPermits(permits); err != nil {
		return nil, err
	}
	return &Semaphore{c: c, name: name, permits: permits}, nil
}

// A Semaphore is a name's N permits on a Client's backend. It is a handle:
// two Semaphores of one name and count, in one process or many, share the
// permits.
type Semaphore struct {
	c       *Client
	name    string
	permits int
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns N, the semaphore's permit count.
func (s *Semaphore) Permits() int { return s.permits }

// Acquire takes one permit: see AcquireN.
func (s *Semaphore) Acquire(ctx context.Context, opts ...lock.Option) (*Permit, error) {
	return s.AcquireN(ctx, 1, opts...)
}

// AcquireN takes count permits at once (all or none) and returns them as one
// Permit, a lease: renewed every TTL/3 unless lock.WithFixedTTL, Done when
// it may be lost, released once. It blocks until count permits are free, ctx
// is done, or the wait limit (lock.WithWait) passes.
//
// Errors: lock.ErrNotAcquired (too few free permits: try-once failed or the
// wait limit passed), ctx.Err(), an error wrapping ErrMismatch if the
// holders took their permits with another count, an error wrapping
// lock.ErrInvalid for bad input, count outside [1, N] included (no server is
// touched), or the backend's error.
func (s *Semaphore) AcquireN(ctx context.Context, count int, opts ...lock.Option) (*Permit, error) {
	if count < 1 || count > s.permits {
		return nil, fmt.Errorf("%w: semaphore: %d permits asked of %d", lock.ErrInvalid, count, s.permits)
	}
	l, err := s.c.m.Acquire(ctx, key(Request{s.name, s.permits, count}), opts...)
	if err != nil {
		return nil, err
	}
	return &Permit{Lease: l, name: s.name, count: count}, nil
}

// Do takes one permit, runs fn with a context that is cancelled the moment
// the permit is lost, and releases it afterwards, with the outcomes of
// lock.Do: Acquire's error if fn did not run, a *lock.LostError if the
// permit was lost before Do ended, else fn's error.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, p *Permit) error, opts ...lock.Option) error {
	if fn == nil {
		return fmt.Errorf("%w: semaphore: nil function", lock.ErrInvalid)
	}
	return lock.Do(ctx, s.c.m, key(Request{s.name, s.permits, 1}), func(ctx context.Context, l *lock.Lease) error {
		return fn(ctx, &Permit{Lease: l, name: s.name, count: 1})
	}, opts...)
}

// Waiting returns how many Acquire calls of this Client wait for the
// semaphore's permits, whatever count they ask for; waiters of other
// Clients are not counted.
func (s *Semaphore) Waiting() int {
	n := 0
	for k := 1; k <= s.permits && k <= maxCountedWaits; k++ {
		n += s.c.m.Waiting(key(Request{s.name, s.permits, k}))
	}
	return n
}

// maxCountedWaits bounds the counts Waiting looks at: acquisitions of more
// permits at once than this are not counted.
const maxCountedWaits = 64

// A Permit is one acquisition's permits of a semaphore: a lock.Lease, with
// its contract (Token, Done, Err, Release, TimeLeft, Extend), whose Key is
// the semaphore's name.
type Permit struct {
	*lock.Lease
	name  string
	count int
}

// Key returns the name of the semaphore the permit is of.
func (p *Permit) Key() string { return p.name }

// Count returns how many permits the Permit holds.
func (p *Permit) Count() int { return p.count }
