package elect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/latchkey-go/latchkey/internal/options"
	"github.com/latchkey-go/latchkey/lock"
)

// A RunOption configures Run.
type RunOption func(*runConfig)

type runConfig struct {
	again    bool
	min, max time.Duration
	ended    func(t *Term, err error)
	invalid  error
}

// Again makes Run campaign again after each term ends, instead of
// returning: the leader loop of a service that must always have one
// instance at work. Run then returns only when ctx is done or the input is
// bad.
func Again() RunOption { return func(c *runConfig) { c.again = true } }

// WithBackoff sets how long Run, with Again, waits before campaigning again:
// min after a term whose function returned nil, doubling (with jitter)
// after each term that failed or was lost or each failed campaign, up to
// max. Default: 100 ms and 10 s. min must be at least 0 and max at least
// min.
func WithBackoff(min, max time.Duration) RunOption {
	return func(c *runConfig) {
		if min < 0 || max < min {
			c.invalid = fmt.Errorf("%w: elect: backoff [%v, %v] is not a range", ErrInvalid, min, max)
			return
		}
		c.min, c.max = min, max
	}
}

// OnTermEnd makes Run, with Again, call f after each term with the term
// and the outcome Run would have returned for it without Again (a failed
// campaign has a nil term).
func OnTermEnd(f func(t *Term, err error)) RunOption {
	return func(c *runConfig) { c.ended = f }
}

// Run campaigns with value, runs fn while leader with a context that is
// cancelled the moment the term ends (its cause then wraps
// lock.ErrLeaseLost), and resigns when fn returns, also when ctx is done.
//
// Without Again its outcomes are lock.Do's: nil when fn succeeded under a
// term that lasted; Campaign's error if it was not elected; a
// *lock.LostError (wrapping lock.ErrLeaseLost) if the term was lost before
// fn returned, whose Err is fn's error, nil if fn succeeded; or fn's error.
// With Again it campaigns again after each term, waiting the backoff
// (WithBackoff), reports each term's outcome to OnTermEnd, and returns
// ctx's error when ctx is done. Errors wrapping ErrInvalid (bad value or
// option, nil fn) are returned at once.
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context, t *Term) error, opts ...RunOption) error {
	c := runConfig{min: 100 * time.Millisecond, max: 10 * time.Second}
	options.Apply(&c, opts)
	switch {
	case fn == nil:
		return fmt.Errorf("%w: elect: nil function", ErrInvalid)
	case c.invalid != nil:
		return c.invalid
	}
	if err := checkValue(value); err != nil {
		return err
	}
	delay := c.min
	for {
		t, err := e.term(ctx, value, fn)
		switch {
		case !c.again:
			return err
		case errors.Is(err, ErrInvalid):
			return err
		case ctx.Err() != nil:
			if c.ended != nil && t != nil {
				c.ended(t, err)
			}
			return ctx.Err()
		}
		if c.ended != nil {
			c.ended(t, err)
		}
		if err == nil {
			delay = c.min
		}
		wait := delay
		if err != nil {
			wait = jitter(delay)
			delay = min(max(2*delay, time.Millisecond), c.max)
		}
		if wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
	}
}

// term is one campaign and term of Run; t is nil if the campaign failed.
func (e *Election) term(ctx context.Context, value string, fn func(ctx context.Context, t *Term) error) (t *Term, err error) {
	t, err = e.Campaign(ctx, value)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.Done():
			if lerr := t.Err(); lerr != lock.ErrReleased {
				cancel(lerr)
			}
		case <-fctx.Done():
		}
	}()
	defer func() {
		cancel(nil)
		<-watched
		rerr := t.Resign(ctx)
		switch {
		case rerr == nil:
		case errors.Is(rerr, lock.ErrNotHeld):
			err = &lock.LostError{Err: err, Lost: t.Err()}
		default:
			err = errors.Join(err, rerr)
		}
	}()
	return t, fn(fctx, t)
}

// jitter returns d less up to a quarter, so candidates that failed together
// do not campaign again in step.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}
