package dedup

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/finish"
	"github.com/latchkey-go/latchkey/internal/options"
)

// Defaults and limits of the options.
const (
	// DefaultProcessingTTL is the claim's lifetime when WithProcessingTTL is
	// not given.
	DefaultProcessingTTL = time.Minute
	// DefaultRetention is how long a processed id is remembered when
	// WithRetention is not given.
	DefaultRetention = 24 * time.Hour
	// MinDuration and MaxDuration bound WithProcessingTTL and WithRetention.
	MinDuration = time.Millisecond
	MaxDuration = 366 * 24 * time.Hour
	// FinishTimeout bounds the Done or Release that follows a handler, its
	// retries included. They run on a context detached from the caller's
	// cancellation: a consumer shutting down must still record what its
	// handler did.
	FinishTimeout = finish.Timeout
)

// An Option configures New.
type Option func(*config)

type config struct {
	ttl       time.Duration
	retention time.Duration
	observe   Observer // nil: none
	invalid   error
}

func newConfig(opts []Option) config {
	c := config{ttl: DefaultProcessingTTL, retention: DefaultRetention}
	options.Apply(&c, opts)
	return c
}

func checkDuration(what string, d time.Duration) error {
	if d < MinDuration || d > MaxDuration {
		return fmt.Errorf("%w: %s %v outside [%v, %v]", ErrInvalid, what, d, MinDuration, MaxDuration)
	}
	return nil
}

// WithProcessingTTL sets how long a claim lasts. A consumer that crashed
// mid-handler holds the message's id until then, after which a redelivery is
// processed; so it must be longer than the handler can take. The handler's
// context is cancelled at it, before the claim can pass to anyone else.
// Default: 1 minute ([DefaultProcessingTTL]).
func WithProcessingTTL(d time.Duration) Option {
	return func(c *config) {
		if err := checkDuration("processing TTL", d); err != nil {
			c.invalid = err
			return
		}
		c.ttl = d
	}
}

// WithRetention sets how long a processed id is remembered; a copy arriving
// later is processed again. It must be longer than the broker's longest
// redelivery or replay delay. Default: 24 hours ([DefaultRetention]).
func WithRetention(d time.Duration) Option {
	return func(c *config) {
		if err := checkDuration("retention", d); err != nil {
			c.invalid = err
			return
		}
		c.retention = d
	}
}

// An Event reports one delivery that Process handled. It carries no message
// id or payload.
type Event struct {
	// Outcome is what Process returned.
	Outcome Outcome
	// Err is the error Process returned.
	Err error
	// Duration is the time Process took, from the claim to the Done or
	// Release that ended it.
	Duration time.Duration
	// StoreErr is the failure of the step that followed the handler: marking
	// the id done (OutcomeProcessed: the effect happened but a redelivery
	// may run it again) or releasing the claim (OutcomeFailed: the
	// redelivery waits for the claim to expire). nil when that step
	// succeeded or did not run.
	StoreErr error
}

// An Observer is told of every delivery Process handled, on the caller's
// goroutine, after the outcome is settled. It must be safe for concurrent use.
// A handler that panics is not reported (its claim is released and the panic
// goes on).
type Observer func(ctx context.Context, e Event)

// WithObserver calls f with every delivery's Event, to count processed
// messages, duplicates dropped, busy copies, released claims and failed Done
// calls; the metrics package has a Prometheus collector that provides f.
// Default: none.
func WithObserver(f Observer) Option {
	return func(c *config) { c.observe = f }
}
