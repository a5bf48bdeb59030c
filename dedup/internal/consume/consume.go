// Package consume holds what the broker adapters of dedup (amqpconsumer,
// natsconsumer, redisconsumer) share: the first bad option given, the error
// handler, and the back-off after a failed read.
package consume

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

// Config is embedded in an adapter's configuration.
type Config struct {
	// Adapter names the adapter in the error of a bad option.
	Adapter string
	// OnError is told of every error Run survives; nil drops them.
	OnError func(context.Context, error)
	// Invalid is the first bad option given, or nil.
	Invalid error
}

// Apply runs the options that are not nil on c, in the order given.
func Apply[C any, O ~func(*C)](c *C, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}

// Fail notes a bad option, wrapping dedup.ErrInvalid, unless one was noted
// before.
func (c *Config) Fail(format string, args ...any) {
	if c.Invalid == nil {
		c.Invalid = fmt.Errorf("%w: %s: "+format, append([]any{dedup.ErrInvalid, c.Adapter}, args...)...)
	}
}

// Check reports ok and, when it is false, notes a bad option as Fail does.
func (c *Config) Check(ok bool, format string, args ...any) bool {
	if !ok {
		c.Fail(format, args...)
	}
	return ok
}

// Report tells the error handler, if there is one, of err.
func (c *Config) Report(ctx context.Context, err error) {
	if c.OnError != nil {
		c.OnError(ctx, err)
	}
}

// Backoff waits after a failed read, twice as long as last, from 50 ms up to
// 5 s, and returns how long that is; it returns early when ctx ends.
func Backoff(ctx context.Context, last time.Duration) time.Duration {
	d := min(max(2*last, 50*time.Millisecond), 5*time.Second)
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
	return d
}
