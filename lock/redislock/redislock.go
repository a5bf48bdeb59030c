package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/lock"
)

// Client is what a Locker needs from a go-redis client: scripts, pipelines
// and one pub/sub subscription. *redis.Client, *redis.ClusterClient and every
// redis.UniversalClient satisfy it.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (redis.UniversalClient)(nil)
)

// A Locker is a lock.Locker on one Redis server or Redis Cluster. Its
// methods are safe for concurrent use. Create it with New and Close it when
// done; Close does not release held leases, which stay renewed until
// released or lost.
type Locker struct {
	*lock.Manager
	n *redisnode.Node
}

var _ lock.Locker = (*Locker)(nil)

// Defaults of the options.
const (
	// DefaultPrefix starts the name of every Redis key a Locker writes.
	DefaultPrefix = redisnode.DefaultPrefix
	// DefaultTokenRetention is how long a key's fencing counter outlives its
	// last acquisition.
	DefaultTokenRetention = redisnode.DefaultTokenRetention
)

// An Option configures New.
type Option func(*options)

// options are those of the Node a Locker runs on, which checks them.
type options = redisnode.Config

// WithPrefix sets the start of every Redis key and of the release channel the
// Locker uses. Default: "latchkey:lock:" ([DefaultPrefix]). Lockers that must
// exclude each other need the same prefix. It must not contain '{' or '}',
// which would change the keys' Redis Cluster hash tag.
func WithPrefix(p string) Option { return Option(redisnode.WithPrefix(p)) }

// WithTokenRetention sets how long a key's fencing counter is kept after the
// key was last acquired. Default: 24 h ([DefaultTokenRetention]); it must be
// at least one second. Tokens keep increasing when the counter expires (the
// next one follows the server clock, see the package doc); retention only
// bounds the memory counters of unused keys take, and keeps tokens rising
// across a backward step of the server clock shorter than it.
func WithTokenRetention(d time.Duration) Option {
	return Option(redisnode.WithTokenRetention(d))
}

// WithBatching turns on or off the coalescing of concurrent acquisitions,
// renewals and releases of one Locker into pipelines (one round trip for
// many goroutines). Default: on. Off sends every command on its own.
func WithBatching(on bool) Option { return Option(redisnode.WithBatching(on)) }

// WithSendsInFlight fixes, with batching on, how many commands or pipelines
// a Locker has on their way to the server at once; calls beyond that wait
// for one to come back and then leave together as one pipeline. It must be
// at least 1. By default the number follows the load, from 2 to 64: it grows
// while round trips stay as short as the shortest seen lately and calls are
// held back, and shrinks while they grow (sends then only queue, for the CPU
// of a busy machine or behind each other), so calls leave in fewer, larger
// pipelines on a busy machine and overlap more against a distant server.
// Fix it only where measurement shows a number that beats the default.
func WithSendsInFlight(n int) Option { return Option(redisnode.WithSendsInFlight(n)) }

// New returns a Locker that keeps its locks in client's Redis. It returns an
// error wrapping lock.ErrInvalid for a nil client or a bad option, and
// touches no server until the first Acquire: the shared pub/sub subscription
// that wakes waiters is opened by the first Acquire that may wait.
func New(client Client, opts ...Option) (*Locker, error) {
	nopts := make([]redisnode.Option, 0, len(opts))
	for _, opt := range opts {
		nopts = append(nopts, redisnode.Option(opt))
	}
	n, err := redisnode.New(client, nopts...)
	if err != nil {
		return nil, err
	}
	m, err := lock.NewManager(n)
	if err != nil {
		return nil, err
	}
	return &Locker{Manager: m, n: n}, nil
}

// Close stops the Locker's pub/sub subscription and waits for its goroutine
// to end. Acquire calls waiting at that moment go on by polling. It does not
// release held leases or close the client. It is safe to call more than once.
func (l *Locker) Close() error { return l.n.Close() }
