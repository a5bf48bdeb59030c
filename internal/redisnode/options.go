package redisnode

import (
	"fmt"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// Defaults of the options; lock/redislock documents each.
const (
	DefaultPrefix         = "latchkey:lock:"
	DefaultTokenRetention = 24 * time.Hour
)

// Config is what the options set. Its zero value is not used: New starts
// from the defaults.
type Config struct {
	prefix    string
	retention time.Duration
	batching  bool
	sends     int   // fixed sends in flight, or 0 for the load's (redisbatch.New)
	invalid   error // the last bad option's error, returned by New
}

// An Option configures New. The options are those of lock/redislock, which
// documents them.
type Option func(*Config)

// WithPrefix sets the start of every Redis key and of the release channel.
// It must not contain '{' or '}', which would change the keys' Redis Cluster
// hash tag.
func WithPrefix(p string) Option {
	return func(o *Config) {
		if strings.ContainsAny(p, "{}") {
			o.invalid = fmt.Errorf("%w: redislock: prefix %q contains a brace", lock.ErrInvalid, p)
			return
		}
		o.prefix = p
	}
}

// WithTokenRetention sets how long a key's fencing counter is kept after the
// key was last acquired; at least one second.
func WithTokenRetention(d time.Duration) Option {
	return func(o *Config) {
		if d < time.Second {
			o.invalid = fmt.Errorf("%w: redislock: token retention %v under 1s", lock.ErrInvalid, d)
			return
		}
		o.retention = d
	}
}

// WithBatching turns on or off the coalescing of concurrent calls into
// pipelines.
func WithBatching(on bool) Option {
	return func(o *Config) { o.batching = on }
}

// WithSendsInFlight bounds, with batching on, how many commands or pipelines
// are on their way to the server at once; at least 1.
func WithSendsInFlight(n int) Option {
	return func(o *Config) {
		if n < 1 {
			o.invalid = fmt.Errorf("%w: redislock: %d sends in flight, want at least 1", lock.ErrInvalid, n)
			return
		}
		o.sends = n
	}
}
