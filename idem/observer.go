package idem

import (
	"context"
	"errors"
	"time"
)

// Outcome is what Do did with one call, as told to an Observer.
type Outcome int

// The outcomes of Do.
const (
	// OutcomeExecuted: fn ran and succeeded; its result was recorded for
	// replay (Event.Err wraps ErrNotRecorded when recording failed).
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReleased: fn failed (or panicked) and its claim was released,
	// so a retry runs fn again.
	OutcomeReleased
	// OutcomeKept: fn failed with an error WithKeepError keeps; the failure
	// was recorded for replay.
	OutcomeKept
	// OutcomeReplayed: a recorded outcome was returned; fn did not run.
	OutcomeReplayed
	// OutcomeConflict: another call holds the key (ErrInProgress, after
	// WithWait's limit when waiting); fn did not run.
	OutcomeConflict
	// OutcomeMismatch: the key was used with another fingerprint
	// (ErrFingerprintMismatch); fn did not run.
	OutcomeMismatch
	// OutcomeInvalid: a bad key or option (ErrInvalidKey, ErrInvalid); fn
	// did not run and the store was not asked.
	OutcomeInvalid
	// OutcomeStoreError: the store failed to claim the key; fn did not run.
	OutcomeStoreError
	// OutcomeCanceled: ctx ended before the key was claimed; fn did not run.
	OutcomeCanceled
)

// String returns the outcome in lower case ("executed", "store_error", ...),
// fit for a metric label.
func (o Outcome) String() string {
	switch o {
	case OutcomeExecuted:
		return "executed"
	case OutcomeReleased:
		return "released"
	case OutcomeKept:
		return "kept"
	case OutcomeReplayed:
		return "replayed"
	case OutcomeConflict:
		return "conflict"
	case OutcomeMismatch:
		return "mismatch"
	case OutcomeInvalid:
		return "invalid"
	case OutcomeStoreError:
		return "store_error"
	case OutcomeCanceled:
		return "canceled"
	}
	return "invalid_outcome"
}

// An Event is one call of Do, told to an Observer when the call returns (or,
// when fn panics, before the panic goes on).
type Event struct {
	Outcome Outcome
	// Duration is the whole call: claim, fn and record or release.
	Duration time.Duration
	// Err is the error Do returns (nil on success); for a panic, errPanicked.
	Err error
}

// An Observer is told of every call of Do made with WithObserver. It runs on
// the calling goroutine, so it must be quick; it is never told the key, which
// is the caller's data.
type Observer func(ctx context.Context, e Event)

// WithObserver makes Do tell o of each call's outcome; metrics.Idem's
// DoObserver is one. Begin ignores it. Default: none.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observe = o }
}

// errPanicked is the Err of the Event of a call whose fn panicked.
var errPanicked = errors.New("idem: operation panicked")

// beginOutcome is the outcome of a call of Do that ended in Begin with err.
func beginOutcome(ctx context.Context, err error) Outcome {
	switch {
	case errors.Is(err, ErrInProgress): // an *InProgressError too
		return OutcomeConflict
	case errors.Is(err, ErrFingerprintMismatch):
		return OutcomeMismatch
	case errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrInvalid):
		return OutcomeInvalid
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return OutcomeCanceled
	}
	return OutcomeStoreError
}
