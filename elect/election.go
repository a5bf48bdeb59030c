package elect

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/latchkey-go/latchkey/internal/options"
	"github.com/latchkey-go/latchkey/lock"
)

// MaxValueLen is the longest value, in bytes, a candidate may campaign or
// proclaim with: the longest holder label a lock stores.
const MaxValueLen = lock.MaxHolderLen

// DefaultPollInterval is how far apart, at most, Observe reads the leader
// on a backend that cannot signal every change (WithPollInterval).
const DefaultPollInterval = time.Second

// An Election is one named election on a Locker. It holds no state of its
// own beyond its settings and is safe for concurrent use; candidates in
// other processes make their own Election with the same name on their own
// Locker of the same backend.
type Election struct {
	locker lock.Locker
	name   string
	ttl    time.Duration
	poll   time.Duration
}

// An Option configures New. Options of New, Campaign and Run are distinct
// types, so the compiler refuses one given to the wrong call; each records
// a bad value, and the call returns it as an error wrapping ErrInvalid, as
// every option of latchkey does.
type Option func(*config)

type config struct {
	ttl, poll time.Duration
	invalid   error // the first bad option's
}

// reject records err unless an earlier option was bad already.
func (c *config) reject(err error) {
	if c.invalid == nil {
		c.invalid = err
	}
}

// WithTTL sets the term's lease length: a leader that dies is replaced
// after at most this long. Default: lock.DefaultTTL (30 s). It must lie in
// [lock.MinTTL, lock.MaxTTL]; the term is renewed every TTL/3 while held.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < lock.MinTTL || d > lock.MaxTTL {
			c.reject(fmt.Errorf("%w: elect: TTL %v outside [%v, %v]", ErrInvalid, d, lock.MinTTL, lock.MaxTTL))
			return
		}
		c.ttl = d
	}
}

// WithPollInterval bounds how long Observe takes to see a change on a
// backend whose watch does not signal every change (Redis, PostgreSQL,
// SQLite, MySQL, Redlock): it reads the leader at least this often, and
// at once when the backend hints at a release. Default: 1 s
// (DefaultPollInterval); at least 10 ms. Backends that signal every change
// (etcd, ZooKeeper, memory) do not poll.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d < 10*time.Millisecond {
			c.reject(fmt.Errorf("%w: elect: poll interval %v shorter than 10ms", ErrInvalid, d))
			return
		}
		c.poll = d
	}
}

// New returns the election called name on l. The name is the lock's key
// and follows its rules (non-empty, at most lock.MaxKeyLen bytes). Errors
// wrap ErrInvalid for a nil Locker, a bad name or a bad option; New touches
// no server.
func New(l lock.Locker, name string, opts ...Option) (*Election, error) {
	if isNil(l) {
		return nil, fmt.Errorf("%w: elect: nil Locker", ErrInvalid)
	}
	if err := lock.CheckKey(name); err != nil {
		return nil, fmt.Errorf("elect: name: %w", err)
	}
	c := config{ttl: lock.DefaultTTL, poll: DefaultPollInterval}
	options.Apply(&c, opts)
	if c.invalid != nil {
		return nil, c.invalid
	}
	return &Election{locker: l, name: name, ttl: c.ttl, poll: c.poll}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// TTL returns the terms' lease length (WithTTL).
func (e *Election) TTL() time.Duration { return e.ttl }

// A CampaignOption configures one Campaign.
type CampaignOption func(*campaign)

type campaign struct {
	wait    time.Duration
	hasWait bool
	invalid error
}

// WithWait bounds how long Campaign waits to be elected, as lock.WithWait
// bounds Acquire: WithWait(0) tries once. Default: until ctx is done. A
// negative d is invalid.
func WithWait(d time.Duration) CampaignOption {
	return func(c *campaign) {
		if d < 0 {
			c.invalid = fmt.Errorf("%w: elect: negative wait %v", ErrInvalid, d)
			return
		}
		c.wait, c.hasWait = d, true
	}
}

// Campaign blocks until the caller leads the election, ctx is done or the
// wait limit (WithWait) passes, and returns the term. value says who leads
// (host, address); everyone who asks or observes sees it. It must be
// non-empty, valid UTF-8 without control characters, at most MaxValueLen
// bytes, and is readable by anyone who can read the backend: never a secret.
//
// Errors: lock.ErrNotAcquired (someone else leads: the try-once campaign
// failed or the wait limit passed), ctx.Err(), an error wrapping ErrInvalid
// for a bad value or option (no server is touched), or the backend's error.
func (e *Election) Campaign(ctx context.Context, value string, opts ...CampaignOption) (*Term, error) {
	if err := checkValue(value); err != nil {
		return nil, err
	}
	var c campaign
	options.Apply(&c, opts)
	if c.invalid != nil {
		return nil, c.invalid
	}
	lopts := []lock.Option{lock.WithHolder(value), lock.WithTTL(e.ttl)}
	if c.hasWait {
		lopts = append(lopts, lock.WithWait(c.wait))
	}
	lease, err := e.locker.Acquire(ctx, e.name, lopts...)
	if err != nil {
		return nil, err
	}
	return &Term{e: e, lease: lease}, nil
}

// checkValue applies the holder label's rules to a candidate's value, with
// the election's words.
func checkValue(value string) error {
	if value == "" {
		// A leader whose value is empty would read as nobody leading (a
		// plain lock of another party has no value either).
		return fmt.Errorf("%w: elect: empty value: say who leads (host, address)", ErrInvalid)
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: elect: value is %d bytes, longer than %d", ErrInvalid, len(value), MaxValueLen)
	}
	if err := lock.CheckHolder(value); err != nil {
		return fmt.Errorf("elect: value: %w", err)
	}
	return nil
}

// isNil reports a nil Locker, also a nil pointer inside the interface.
func isNil(l lock.Locker) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
