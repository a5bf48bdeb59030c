// Package consume holds what the broker adapters of dedup (amqpconsumer,
// natsconsumer, redisconsumer) share: the first bad option given, the error
// handler, and the loop that backs off after a failed read.
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

// Loop runs step until ctx ends, then returns ctx.Err(). A step that fails
// before ctx ends is reported, as wrap makes its error, and followed by a
// wait twice as long as the last, from 50 ms up to 5 s, cut short when ctx
// ends; a step that succeeds starts the waits over.
func (c *Config) Loop(ctx context.Context, step func(context.Context) error, wrap func(error) error) error {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := step(ctx)
		if err == nil {
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			break
		}
		c.Report(ctx, wrap(err))
		backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return ctx.Err()
}
