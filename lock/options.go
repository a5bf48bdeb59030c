package lock

import (
	"fmt"
	"time"
)

// Limits on the arguments Acquire accepts.
const (
	// DefaultTTL is the lease length when WithTTL is not given.
	DefaultTTL = 30 * time.Second
	// MinTTL and MaxTTL bound WithTTL. Shorter leases cannot be renewed reliably
	// over a network; longer ones turn a crashed holder into an outage.
	MinTTL = 10 * time.Millisecond
	MaxTTL = 24 * time.Hour
	// MaxKeyLen is the longest key, in bytes, that Acquire accepts.
	MaxKeyLen = 1024
)

// An Option configures one Acquire call.
type Option func(*config)

type config struct {
	ttl     time.Duration
	wait    time.Duration // < 0: until ctx is done
	fixed   bool
	holder  string // WithHolder's label
	invalid error
}

// WithTTL sets the lease length. Default: 30 s ([DefaultTTL]). It must lie in
// [MinTTL, MaxTTL]. A renewed lease is extended by this much every TTL/3.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < MinTTL || d > MaxTTL {
			c.invalid = fmt.Errorf("%w: TTL %v outside [%v, %v]", ErrInvalid, d, MinTTL, MaxTTL)
			return
		}
		c.ttl = d
	}
}

// WithWait bounds how long Acquire waits for a held lock. Default: wait until
// ctx is done. WithWait(0) tries exactly once (tryLock). A negative d is
// invalid.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid = fmt.Errorf("%w: negative wait %v", ErrInvalid, d)
			return
		}
		c.wait = d
	}
}

// WithFixedTTL turns renewal off: the lease simply expires after its TTL unless
// released first, and Done closes then with ErrLeaseLost. Default: renewed.
func WithFixedTTL() Option {
	return func(c *config) { c.fixed = true }
}

func newConfig(key string, opts []Option) (config, error) {
	c := config{ttl: DefaultTTL, wait: -1}
	if err := CheckKey(key); err != nil {
		return c, err
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		o(&c)
	}
	return c, c.invalid
}

// CheckKey reports whether key is acceptable to every backend: non-empty and
// at most MaxKeyLen bytes. Keys are data: any bytes are allowed.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, longer than %d", ErrInvalid, len(key), MaxKeyLen)
	}
	return nil
}
