package redislock

import (
	"context"
	cryptorand "crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
	b *backend
}

var _ lock.Locker = (*Locker)(nil)

// Defaults of the options.
const (
	// DefaultPrefix starts the name of every Redis key a Locker writes.
	DefaultPrefix = "latchkey:lock:"
	// DefaultTokenRetention is how long a key's fencing counter outlives its
	// last acquisition.
	DefaultTokenRetention = 24 * time.Hour
)

// An Option configures New.
type Option func(*options)

type options struct {
	prefix    string
	retention time.Duration
	batching  bool
	sends     int
	invalid   error
}

// WithPrefix sets the start of every Redis key and of the release channel the
// Locker uses. Default: "latchkey:lock:" ([DefaultPrefix]). Lockers that must
// exclude each other need the same prefix. It must not contain '{' or '}',
// which would change the keys' Redis Cluster hash tag.
func WithPrefix(p string) Option {
	return func(o *options) {
		if strings.ContainsAny(p, "{}") {
			o.invalid = fmt.Errorf("%w: redislock: prefix %q contains a brace", lock.ErrInvalid, p)
			return
		}
		o.prefix = p
	}
}

// WithTokenRetention sets how long a key's fencing counter is kept after the
// key was last acquired. Default: 24 h ([DefaultTokenRetention]); it must be
// at least one second. Tokens keep increasing when the counter expires (the
// next one is taken from the server clock, see the package doc); retention
// only bounds the memory counters of unused keys take, and keeps tokens
// rising across a backward step of the server clock shorter than it.
func WithTokenRetention(d time.Duration) Option {
	return func(o *options) {
		if d < time.Second {
			o.invalid = fmt.Errorf("%w: redislock: token retention %v under 1s", lock.ErrInvalid, d)
			return
		}
		o.retention = d
	}
}

// WithBatching turns on or off the coalescing of concurrent acquisitions,
// renewals and releases of one Locker into pipelines (one round trip for
// many goroutines). Default: on. Off sends every command on its own.
func WithBatching(on bool) Option {
	return func(o *options) { o.batching = on }
}

// DefaultSendsInFlight is the default of WithSendsInFlight.
const DefaultSendsInFlight = redisbatch.DefaultSends

// WithSendsInFlight bounds, with batching on, how many commands or pipelines
// a Locker has on their way to the server at once; calls beyond that wait
// for one to come back and then leave together as one pipeline. Fewer make
// bigger pipelines: fewer system calls per lock on both sides, at the cost of
// waiting up to one round trip more. Default: 8 ([DefaultSendsInFlight]),
// the best of 1 to 16 measured against one Redis sharing 2 cores with the
// client. It must be at least 1.
func WithSendsInFlight(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.invalid = fmt.Errorf("%w: redislock: %d sends in flight, want at least 1", lock.ErrInvalid, n)
			return
		}
		o.sends = n
	}
}

// New returns a Locker that keeps its locks in client's Redis. It returns an
// error wrapping lock.ErrInvalid for a nil client or a bad option, and
// touches no server until the first Acquire: the shared pub/sub subscription
// that wakes waiters is opened by the first Acquire that may wait.
func New(client Client, opts ...Option) (*Locker, error) {
	b, err := build(client, opts)
	if err != nil {
		return nil, err
	}
	m, err := lock.NewManager(b)
	if err != nil {
		return nil, err
	}
	return &Locker{Manager: m, b: b}, nil
}

// build checks client and opts and returns the backend they describe.
func build(client Client, opts []Option) (*backend, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redislock: nil client", lock.ErrInvalid)
	}
	o := options{prefix: DefaultPrefix, retention: DefaultTokenRetention, batching: true, sends: DefaultSendsInFlight}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.invalid != nil {
		return nil, o.invalid
	}
	return newBackend(client, o), nil
}

// Close stops the Locker's pub/sub subscription and waits for its goroutine
// to end. Acquire calls waiting at that moment go on by polling. It does not
// release held leases or close the client. It is safe to call more than once.
func (l *Locker) Close() error {
	l.b.close()
	return nil
}

// isNil reports a nil client, also a nil pointer of go-redis's client types
// inside the interface.
func isNil(c Client) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// newInstanceID returns 64 random bits, hex-encoded: 16 bytes.
func newInstanceID() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lockKey returns the Redis key of key's lock. Its companions, the fencing
// counter and the waiters flag, append ":fence" and ":waiters"; all three
// share the hash tag between the braces, so one script can touch them on
// Redis Cluster. The tag is key itself unless key starts with '}' (which would
// make an empty tag, hashed as the whole name) or '\', which are escaped with
// a leading '\' so distinct keys never share a name.
func lockKey(prefix, key string) string {
	esc := ""
	if key[0] == '}' || key[0] == '\\' {
		esc = `\`
	}
	return prefix + "{" + esc + key + "}"
}

// userKey inverts lockKey; ok is false for names that lockKey cannot produce.
func userKey(prefix, name string) (key string, ok bool) {
	if !strings.HasPrefix(name, prefix+"{") || !strings.HasSuffix(name, "}") || len(name) < len(prefix)+3 {
		return "", false
	}
	t := name[len(prefix)+1 : len(name)-1]
	if t[0] == '\\' {
		t = t[1:]
		if t == "" || (t[0] != '}' && t[0] != '\\') {
			return "", false
		}
	} else if t[0] == '}' {
		return "", false
	}
	return t, true
}

// millis rounds d up to whole milliseconds, so the server never keeps a lock
// for less than the holder was promised.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
