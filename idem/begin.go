package idem

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/internal/finish"
)

// Replay is a recorded outcome found by Begin.
type Replay struct {
	// Result is what the first run recorded; never nil.
	Result []byte
}

// Run is the ownership of one key for one execution. Its owner runs the
// operation, then calls Record or Release exactly once.
type Run struct {
	store     Store
	key       string
	token     string
	deadline  time.Time
	retention time.Duration
	finished  atomic.Bool
}

// Begin starts the claim -> run -> record cycle for key. Exactly one of its
// results is non-nil:
//
//   - a *Run: the caller owns the key; it runs the operation before
//     Run.Deadline and then calls Run.Record or Run.Release;
//   - a *Replay: the key has an outcome for the same fingerprint;
//   - an error: ErrFingerprintMismatch, an *InProgressError (ErrInProgress;
//     after WithWait's limit when waiting), ErrInvalidKey, ErrInvalid, the
//     store's error, or ctx's error.
func Begin(ctx context.Context, s Store, key, fingerprint string, opts ...Option) (*Run, *Replay, error) {
	cfg := newConfig(opts)
	b, err := begin(ctx, s, key, fingerprint, cfg)
	switch {
	case err != nil:
		return nil, nil, err
	case b.done:
		return nil, &Replay{Result: b.result}, nil
	}
	return &Run{store: s, key: key, token: b.token, deadline: b.deadline, retention: cfg.retention}, nil, nil
}

// begun is what begin found: a claim (token and deadline) or, when done, a
// recorded outcome.
type begun struct {
	token    string
	deadline time.Time
	done     bool
	result   []byte // never nil when done
}

// begin is Begin with its options read, without allocating the Run or the
// Replay.
func begin(ctx context.Context, s Store, key, fingerprint string, cfg *config) (begun, error) {
	if cfg.invalid != nil {
		return begun{}, cfg.invalid
	}
	if s == nil {
		return begun{}, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	if err := CheckKey(key); err != nil {
		return begun{}, err
	}
	var waitUntil time.Time
	if cfg.wait > 0 {
		waitUntil = time.Now().Add(cfg.wait)
	}
	backoff := 5 * time.Millisecond
	for {
		// The local deadline starts before the store's, so the owner stops
		// before anyone else can take the key over.
		start := time.Now()
		c, err := s.Claim(ctx, key, fingerprint, cfg.inProgress)
		if err != nil {
			return begun{}, err
		}
		switch c.State {
		case Claimed:
			return begun{token: c.Token, deadline: start.Add(cfg.inProgress)}, nil
		case Done:
			if c.Fingerprint != fingerprint {
				return begun{}, ErrFingerprintMismatch
			}
			if c.Result == nil {
				c.Result = []byte{}
			}
			return begun{done: true, result: c.Result}, nil
		case InProgress:
			if c.Fingerprint != fingerprint {
				return begun{}, ErrFingerprintMismatch
			}
		default:
			return begun{}, fmt.Errorf("idem: store returned invalid claim state %d", c.State)
		}
		left := time.Until(waitUntil)
		if left <= 0 {
			return begun{}, &InProgressError{RetryAfter: c.RetryAfter}
		}
		sleep := min(backoff, left)
		if c.RetryAfter > 0 && c.RetryAfter+time.Millisecond < sleep {
			sleep = c.RetryAfter + time.Millisecond
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return begun{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Key is the key this run owns.
func (r *Run) Key() string { return r.key }

// Deadline is the local in-progress deadline. It is never later than the
// store's: after it, another caller may take the key over and run the
// operation again, so an owner that is still working must stop.
func (r *Run) Deadline() time.Time { return r.deadline }

// Context returns ctx with the run's deadline.
func (r *Run) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, r.deadline)
}

var errFinished = errors.New("idem: run already recorded or released")

// Record keeps result as the key's outcome, replayed to later callers for the
// retention set by WithRetention. A store error is retried twice, after 50
// and 100 ms, while ctx lasts: a lost record would turn every copy into
// ErrInProgress until the deadline. It returns ErrClaimLost when the claim
// was taken over (not retried), or the store's last error; a second Record
// or Release on one Run fails.
func (r *Run) Record(ctx context.Context, result []byte) error {
	if !r.finished.CompareAndSwap(false, true) {
		return errFinished
	}
	if result == nil {
		result = []byte{}
	}
	return finish.Retry(ctx, func(ctx context.Context) error {
		return r.store.Record(ctx, r.key, r.token, result, r.retention)
	}, claimLost)
}

// Release gives the key up without an outcome, so the next copy runs the
// operation. Use it when the run failed and changed nothing. It retries as
// Record does, and returns ErrClaimLost when the claim was taken over, or
// the store's last error.
func (r *Run) Release(ctx context.Context) error {
	if !r.finished.CompareAndSwap(false, true) {
		return errFinished
	}
	return finish.Retry(ctx, func(ctx context.Context) error {
		return r.store.Release(ctx, r.key, r.token)
	}, claimLost)
}

func claimLost(err error) bool { return errors.Is(err, ErrClaimLost) }

// Finish runs fn with a context detached from ctx's cancellation and bounded by
// FinishTimeout: recording an outcome must not fail because the client that
// asked for it went away.
func Finish(ctx context.Context, fn func(context.Context) error) error {
	fctx, cancel := finish.Detached(ctx)
	defer cancel()
	return fn(fctx)
}
