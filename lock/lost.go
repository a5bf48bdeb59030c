package lock

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
