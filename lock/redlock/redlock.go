package redlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// Client is what a Locker needs from the go-redis client of each node:
// *redis.Client (the usual choice: one per independent master) and every
// redis.UniversalClient satisfy it.
type Client = redislock.Client

// A Locker is a lock.Locker over N independent Redis masters. Its methods
// are safe for concurrent use. Create it with New and Close it when done;
// Close does not release held leases, which stay renewed until released or
// lost.
type Locker struct {
	*lock.Manager
	b *backend
}

var _ lock.Locker = (*Locker)(nil)

// MaxNodeTimeout caps the default per-node timeout (see WithNodeTimeout).
const MaxNodeTimeout = 500 * time.Millisecond

// An Option configures New.
type Option func(*options)

type options struct {
	quorum    int
	timeout   time.Duration
	prefix    string
	retention time.Duration
	batching  bool
	sends     int
	invalid   error
}

// WithQuorum sets how many nodes must agree for an acquisition, renewal or
// release to count. Default: a majority, N/2+1. It must be a majority (more
// than N/2, so that every two quorums share a node, on which mutual exclusion
// and fencing rest) and at most N.
func WithQuorum(q int) Option {
	return func(o *options) { o.quorum = q }
}

// WithNodeTimeout bounds each call to one node, so that a slow or silent node
// costs an attempt at most this much. Default: a tenth of the lease's TTL, at
// most 500 ms ([MaxNodeTimeout]). It must be positive and should stay small
// against the TTL: an acquisition is granted only if it ends, after two
// rounds, within TTL - elapsed - drift.
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.invalid = fmt.Errorf("%w: redlock: node timeout %v not positive", lock.ErrInvalid, d)
			return
		}
		o.timeout = d
	}
}

// WithPrefix sets the start of every Redis key and of the release channel,
// on every node, as redislock.WithPrefix does. Default: "latchkey:lock:"
// (redislock.DefaultPrefix). Redlock and redislock Lockers must not share a
// prefix on the same server: the key layout is the same, the quorum is not.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithTokenRetention sets how long a node keeps a key's fencing counter
// after the key was last acquired there, as redislock.WithTokenRetention
// does. Default: 24 h (redislock.DefaultTokenRetention); at least 1 s.
func WithTokenRetention(d time.Duration) Option {
	return func(o *options) {
		if d < time.Second {
			o.invalid = fmt.Errorf("%w: redlock: token retention %v under 1s", lock.ErrInvalid, d)
			return
		}
		o.retention = d
	}
}

// WithBatching turns on or off the coalescing of concurrent calls to one
// node into pipelines, as redislock.WithBatching does. Default: on.
func WithBatching(on bool) Option {
	return func(o *options) { o.batching = on }
}

// DefaultSendsInFlight is the default of WithSendsInFlight.
const DefaultSendsInFlight = 1

// WithSendsInFlight bounds, with batching on, how many commands or pipelines
// a Locker has on their way to each node at once, as
// redislock.WithSendsInFlight does. Default: 1 ([DefaultSendsInFlight]),
// fixed, where a one-server lock's number follows the load: a Redlock lock
// costs five times the system calls of a one-server lock. With five servers on 2 cores shared with the client, 1
// gave about 1.9x the pairs per second of 8 at 16 goroutines and 1.7x at 64;
// 2 gave 1.7x and 1.4x. It must be at least 1.
func WithSendsInFlight(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.invalid = fmt.Errorf("%w: redlock: %d sends in flight, want at least 1", lock.ErrInvalid, n)
			return
		}
		o.sends = n
	}
}

// New returns a Locker on the Redis masters behind clients, one client per
// independent server (not replicas of one another, not nodes of one Cluster,
// no server twice). It returns an error wrapping lock.ErrInvalid for an empty
// list, a nil client or a bad option, and touches no server until the first
// Acquire.
func New(clients []Client, opts ...Option) (*Locker, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: redlock: no client", lock.ErrInvalid)
	}
	o := options{
		quorum:    len(clients)/2 + 1,
		prefix:    redisnode.DefaultPrefix,
		retention: redisnode.DefaultTokenRetention,
		batching:  true,
		sends:     DefaultSendsInFlight,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.invalid != nil {
		return nil, o.invalid
	}
	if n := len(clients); o.quorum <= n/2 || o.quorum > n {
		return nil, fmt.Errorf("%w: redlock: quorum %d of %d nodes is not a majority", lock.ErrInvalid, o.quorum, n)
	}
	b := &backend{
		quorum:    o.quorum,
		timeout:   o.timeout,
		retention: o.retention.Milliseconds(),
	}
	for _, c := range clients {
		n, err := redisnode.New(c,
			redisnode.WithPrefix(o.prefix),
			redisnode.WithTokenRetention(o.retention),
			redisnode.WithBatching(o.batching),
			redisnode.WithSendsInFlight(o.sends))
		if err != nil {
			b.close()
			return nil, err
		}
		b.nodes = append(b.nodes, n)
		b.raisers = append(b.raisers, redisbatch.NewRunner(c, o.batching, o.sends))
	}
	m, err := lock.NewManager(b)
	if err != nil {
		b.close()
		return nil, err
	}
	return &Locker{Manager: m, b: b}, nil
}

// Close stops the Locker's pub/sub subscriptions, one per node, and waits
// for their goroutines. Acquire calls waiting at that moment go on by
// polling. It does not release held leases or close the clients. It is safe
// to call more than once.
func (l *Locker) Close() error {
	l.b.close()
	return nil
}

// errNoWatch is returned by WatchRelease when no node can watch.
var errNoWatch = errors.New("redlock: no node can watch for releases")
