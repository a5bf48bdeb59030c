package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// outcome is what Do records: the JSON value, or a kept failure's message.
type outcome struct {
	Value json.RawMessage `json:"v,omitempty"`
	Err   *string         `json:"e,omitempty"`
}

// Do runs fn at most once per key across every process sharing s, and hands
// every caller the first successful run's result.
//
// The first caller claims key, runs fn with a context that ends at the
// in-progress deadline, and records the result, JSON-encoded, for the
// retention. Later callers with the same key get the recorded result decoded
// into a T; fn does not run for them. While the first run is in progress they
// get an *InProgressError (ErrInProgress), or wait for the result with
// WithWait.
//
// When fn fails, its claim is released and its error returned, so a retry runs
// fn again; WithKeepError records chosen failures instead. When fn panics, the
// claim is released and the panic continues. When the result cannot be
// recorded, Do returns the result together with an error wrapping
// ErrNotRecorded.
//
// Other errors: ErrFingerprintMismatch (see WithFingerprint), ErrInvalidKey,
// ErrInvalid, the store's error, and ctx's error. WithObserver tells an
// Observer (metrics.Idem's DoObserver, say) of each call's outcome.
func Do[T any](ctx context.Context, s Store, key string, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	cfg := newConfig(opts)
	if cfg.observe == nil {
		v, _, err := do(ctx, s, key, fn, cfg)
		return v, err
	}
	start := time.Now()
	panicked := true
	defer func() {
		if panicked {
			cfg.observe(ctx, Event{Outcome: OutcomeReleased, Duration: time.Since(start), Err: errPanicked})
		}
	}()
	v, o, err := do(ctx, s, key, fn, cfg)
	panicked = false
	cfg.observe(ctx, Event{Outcome: o, Duration: time.Since(start), Err: err})
	return v, err
}

// do is Do; it also returns the call's outcome.
func do[T any](ctx context.Context, s Store, key string, fn func(context.Context) (T, error), cfg *config) (T, Outcome, error) {
	var zero T
	bg, err := begin(ctx, s, key, cfg.fingerprint, cfg)
	if err != nil {
		return zero, beginOutcome(ctx, err), err
	}
	if bg.done {
		v, err := decodeOutcome[T](bg.result)
		return v, OutcomeReplayed, err
	}

	run := &Run{store: s, key: key, token: bg.token, deadline: bg.deadline, retention: cfg.retention}
	v, err := runOnce(ctx, run, fn)
	if err != nil {
		if cfg.keepError != nil && cfg.keepError(err) {
			msg := err.Error()
			b, _ := json.Marshal(outcome{Err: &msg}) // a string and nothing else: cannot fail
			if rerr := Finish(ctx, func(c context.Context) error { return run.Record(c, b) }); rerr != nil {
				return zero, OutcomeKept, errors.Join(err, fmt.Errorf("%w: %w", ErrNotRecorded, rerr))
			}
			return zero, OutcomeKept, err
		}
		if rerr := Finish(ctx, run.Release); rerr != nil {
			return zero, OutcomeReleased, errors.Join(err, fmt.Errorf("idem: releasing claim: %w", rerr))
		}
		return zero, OutcomeReleased, err
	}
	raw, err := json.Marshal(v)
	var b []byte
	if err == nil {
		// json.Marshal(outcome{Value: raw}), without checking and
		// compacting again what json.Marshal just wrote.
		b = append(append(append(make([]byte, 0, len(raw)+len(`{"v":}`)), `{"v":`...), raw...), '}')
	}
	if err != nil {
		// The effect happened but its result cannot be replayed. Record that
		// fact rather than release: a copy must not run the operation again.
		msg := fmt.Sprintf("idem: result of type %T could not be recorded: %v", v, err)
		b, _ = json.Marshal(outcome{Err: &msg})
		if rerr := Finish(ctx, func(c context.Context) error { return run.Record(c, b) }); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return v, OutcomeExecuted, fmt.Errorf("%w: encoding result: %w", ErrNotRecorded, err)
	}
	if err := Finish(ctx, func(c context.Context) error { return run.Record(c, b) }); err != nil {
		return v, OutcomeExecuted, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return v, OutcomeExecuted, nil
}

// runOnce runs fn under the run's deadline and releases the claim if fn panics.
func runOnce[T any](ctx context.Context, run *Run, fn func(context.Context) (T, error)) (v T, err error) {
	rctx, cancel := run.Context(ctx)
	defer cancel()
	panicking := true
	defer func() {
		if panicking {
			_ = Finish(ctx, run.Release)
		}
	}()
	v, err = fn(rctx)
	panicking = false
	return v, err
}

func decodeOutcome[T any](b []byte) (T, error) {
	var zero T
	// What do records for a result, {"v":<value>}, is decoded in one pass;
	// anything else, or a middle that is not one JSON value, the long way.
	if len(b) > len(`{"v":}`) && string(b[:len(`{"v":`)]) == `{"v":` && b[len(b)-1] == '}' {
		var v T
		if json.Unmarshal(b[len(`{"v":`):len(b)-1], &v) == nil {
			return v, nil
		}
	}
	var o outcome
	if err := json.Unmarshal(b, &o); err != nil {
		return zero, fmt.Errorf("idem: decoding recorded outcome: %w", err)
	}
	if o.Err != nil {
		return zero, &replayedError{msg: *o.Err}
	}
	var v T
	if len(o.Value) > 0 {
		if err := json.Unmarshal(o.Value, &v); err != nil {
			return zero, fmt.Errorf("idem: decoding recorded result into %T: %w", v, err)
		}
	}
	return v, nil
}
