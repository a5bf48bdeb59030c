package idem

import (
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/finish"
)

// Defaults and limits of the options.
const (
	// DefaultInProgress is the in-progress deadline when WithInProgress is not
	// given. A claim whose owner has not finished by then is taken over.
	DefaultInProgress = time.Minute
	// DefaultRetention is how long an outcome is replayed when WithRetention
	// is not given.
	DefaultRetention = 24 * time.Hour
	// MinDuration and MaxDuration bound WithInProgress and WithRetention.
	MinDuration = time.Millisecond
	MaxDuration = 366 * 24 * time.Hour
	// FinishTimeout bounds the Record or Release that follows a run, its
	// retries included; they use a context detached from the caller's
	// cancellation, so a client that hangs up cannot make the outcome go
	// unrecorded.
	FinishTimeout = finish.Timeout
)

// An Option configures Begin or Do.
type Option func(*config)

type config struct {
	inProgress  time.Duration
	retention   time.Duration
	wait        time.Duration
	fingerprint string
	keepError   func(error) bool
	observe     Observer // nil: none
	invalid     error
}

func newConfig(opts []Option) *config {
	c := &config{inProgress: DefaultInProgress, retention: DefaultRetention}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

func checkDuration(what string, d time.Duration) error {
	if d < MinDuration || d > MaxDuration {
		return fmt.Errorf("%w: %s %v outside [%v, %v]", ErrInvalid, what, d, MinDuration, MaxDuration)
	}
	return nil
}

// setDuration sets *dst, c's what, to d when checkDuration accepts it, and
// otherwise keeps its error.
func (c *config) setDuration(dst *time.Duration, what string, d time.Duration) {
	if err := checkDuration(what, d); err != nil {
		c.invalid = err
		return
	}
	*dst = d
}

// WithInProgress sets the in-progress deadline: how long a claim stays owned
// by a caller that neither records nor releases it (it crashed). After it, the
// next copy runs the operation again, so it must be longer than the operation
// can take; the operation's context is cancelled at it. Default: 1 minute
// ([DefaultInProgress]).
func WithInProgress(d time.Duration) Option {
	return func(c *config) { c.setDuration(&c.inProgress, "in-progress deadline", d) }
}

// WithRetention sets how long an outcome is kept and replayed. Default: 24
// hours ([DefaultRetention]). A copy arriving later runs the operation again.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.setDuration(&c.retention, "retention", d) }
}

// WithWait makes a caller that finds the key in progress wait up to d for the
// outcome and replay it (or run the operation itself if the holder released
// its claim) instead of failing at once with ErrInProgress. Default: 0, no
// waiting. Waiting polls the store with a backoff of 5 ms doubling to 200 ms.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid = fmt.Errorf("%w: negative wait %v", ErrInvalid, d)
			return
		}
		c.wait = d
	}
}

// WithFingerprint sets, for Do, a digest of the operation's arguments. A later
// call with the same key and another fingerprint fails with
// ErrFingerprintMismatch instead of replaying an answer to a different
// question. Default: "" (the key alone identifies the operation).
func WithFingerprint(fp string) Option {
	return func(c *config) { c.fingerprint = fp }
}

// WithKeepError makes Do record a failure for which keep returns true: later
// callers get an error wrapping ErrReplayedFailure with the same message, and
// the operation does not run again. Use it for failures that are final (card
// declined). Default: no failure is kept; the claim is released so a retry
// runs the operation.
func WithKeepError(keep func(error) bool) Option {
	return func(c *config) { c.keepError = keep }
}

// CheckOptions returns the error an invalid option would make Begin or Do
// return (wrapping ErrInvalid), so that a program can refuse a bad
// configuration at start-up rather than on its first request.
func CheckOptions(opts ...Option) error { return newConfig(opts).invalid }
