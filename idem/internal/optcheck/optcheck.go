// Package optcheck holds what the configurations of the idempotency
// middlewares (idemhttp, idemgrpc) share: the idem options every guarded
// call runs with, and one error per bad option given, naming its call.
package optcheck

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/latchkey-go/latchkey/idem"
)

// Config is embedded in a middleware's configuration.
type Config struct {
	// Idem holds the idem options given, each checked, in the order given:
	// a later one overrides an earlier one, as idem.Begin applies them.
	Idem []idem.Option
	// Invalid holds one error per bad option, in the order given.
	Invalid []error
}

// Reject notes that the option called as call is bad, for reason err.
func (c *Config) Reject(call string, err error) {
	c.Invalid = append(c.Invalid, fmt.Errorf("%s: %w", call, err))
}

// RejectNil notes that the option called as call was given a nil function,
// where a what is required.
func (c *Config) RejectNil(call, what string) {
	c.Reject(call+"(nil)", fmt.Errorf("%w: a %s is required", idem.ErrInvalid, what))
}

// SetFunc sets *dst to f, the function an option was given, unless f is
// nil: then it notes that the option called as call was given a nil
// function, where a what is required, and *dst keeps its value.
func SetFunc[F any](c *Config, dst *F, f F, call, what string) {
	if reflect.ValueOf(f).IsNil() {
		c.RejectNil(call, what)
		return
	}
	*dst = f
}

// UseIdem keeps o for every idem.Begin when idem accepts it, so the bounds
// are idem's, and otherwise notes that the option called as call is bad.
func (c *Config) UseIdem(call string, o idem.Option) {
	if err := idem.CheckOptions(o); err != nil {
		c.Reject(call, err)
		return
	}
	c.Idem = append(c.Idem, o)
}

// Err is the error of every bad option given, or nil.
func (c *Config) Err() error { return errors.Join(c.Invalid...) }
