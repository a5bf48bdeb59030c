package fence

import "errors"

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrStale means the write carried a token lower than one the resource has
	// already applied: a later lock holder has written. Nothing was changed.
	// Do not retry with the same token; the lease it came from is over.
	ErrStale = errors.New("fence: stale token")

	// ErrNotFound means a guarded update found no record to update. Nothing
	// was changed. Use an upsert to create records.
	ErrNotFound = errors.New("fence: record not found")

	// ErrInvalid wraps every bad-input error (nil holder, token out of the
	// store's range, bad identifier). Such calls change nothing and touch no
	// server.
	ErrInvalid = errors.New("fence: invalid argument")
)
