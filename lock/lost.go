package lock

import "errors"

// A LostError is what Do returns when the lease was lost while fn ran. The
// work may then have overlapped another holder's, and the caller must know;
// but whether fn's effect happened is a different question, which Err
// answers: nil means fn succeeded (the card was charged, the row written),
// so the caller should report success and raise an alert, not fail and have
// the work retried.
//
// errors.Is(err, ErrLeaseLost) holds for a LostError, and so does
// errors.Is/As for fn's own error and the loss's cause.
type LostError struct {
	// Err is fn's error, nil if fn succeeded.
	Err error
	// Lost is the lease's error (Lease.Err); it wraps ErrLeaseLost.
	Lost error
}

// Succeeded reports whether fn returned nil: its effect happened, although
// the lease was lost before Do ended.
func (e *LostError) Succeeded() bool { return e.Err == nil }

func (e *LostError) Error() string {
	if e.Err == nil {
		return e.Lost.Error() + "; the work succeeded"
	}
	return e.Lost.Error() + "; the work failed: " + e.Err.Error()
}

// Unwrap returns the loss and, if fn failed, fn's error.
func (e *LostError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Lost}
	}
	return []error{e.Lost, e.Err}
}

// lossError is a lost lease's error (Lease.Err): "lock: lease lost: " and
// what happened, then the backend's error if one told of it.
type lossError struct {
	what  string
	cause error // the backend's error, or nil
}

func leaseLost(what string, cause error) error { return &lossError{what: what, cause: cause} }

func (e *lossError) Error() string { return ErrLeaseLost.Error() + ": " + e.detail() }

// detail is the message after the sentinel's.
func (e *lossError) detail() string {
	if e.cause == nil {
		return e.what
	}
	return e.what + ": " + e.cause.Error()
}

func (e *lossError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrLeaseLost}
	}
	return []error{ErrLeaseLost, e.cause}
}

// notHeldError is what Release and Extend return for a lost lease: "lock:
// not held: lease lost: ...", wrapping ErrNotHeld and the loss.
type notHeldError struct{ loss error }

func (e notHeldError) Error() string {
	var le *lossError
	if errors.As(e.loss, &le) {
		return ErrNotHeld.Error() + ": lease lost: " + le.detail()
	}
	return ErrNotHeld.Error() + ": " + e.loss.Error()
}

func (e notHeldError) Unwrap() []error { return []error{ErrNotHeld, e.loss} }
