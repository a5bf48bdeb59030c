package idem

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers test for them with errors.Is; context errors
// (context.Canceled, context.DeadlineExceeded) are returned as they are.
var (
	// ErrInProgress means another caller holds the key and has not finished
	// yet. The error returned is an [*InProgressError] that also says how long
	// until the holder's in-progress deadline.
	ErrInProgress = errors.New("idem: request in progress")

	// ErrFingerprintMismatch means the key was first used for a different
	// request (another fingerprint). Nothing ran and nothing changed.
	ErrFingerprintMismatch = errors.New("idem: key reused for a different request")

	// ErrClaimLost means a Record or Release came from a caller that no longer
	// holds the key: its in-progress deadline passed and another caller took
	// the key over, or the record was deleted behind the store's back.
	ErrClaimLost = errors.New("idem: claim lost")

	// ErrNotRecorded means the operation ran but its outcome could not be
	// recorded. Do returns it together with the operation's result: the effect
	// happened, but a copy arriving after the in-progress deadline may run the
	// operation again.
	ErrNotRecorded = errors.New("idem: outcome not recorded")

	// ErrInvalidKey means a key is empty, too long, or holds bytes that are not
	// printable UTF-8. Nothing was sent to the store.
	ErrInvalidKey = errors.New("idem: invalid key")

	// ErrInvalid wraps every other bad argument (durations out of range, nil
	// store). Nothing was sent to the store.
	ErrInvalid = errors.New("idem: invalid argument")

	// ErrTokenInvalid means a one-time submit token is unknown, expired,
	// already consumed, or was issued for another binding. A second submit of
	// the same form gets this error.
	ErrTokenInvalid = errors.New("idem: token invalid or already used")

	// ErrNotFound means a store holds no live record for a key: none was
	// ever claimed, or it was released, forgotten, or its in-progress
	// deadline or retention has ended. The next request with the key runs.
	ErrNotFound = errors.New("idem: no record for this key")

	// ErrReplayedFailure wraps a failure that was kept (see [WithKeepError])
	// and is now replayed to a later caller; the operation did not run again.
	ErrReplayedFailure = errors.New("idem: replayed failure")
)

// InProgressError is returned when another caller holds the key. It matches
// [ErrInProgress] with errors.Is.
type InProgressError struct {
	// RetryAfter is how long until the holder's in-progress deadline, as the
	// store's clock sees it; 0 when the store cannot tell. After it, a new
	// attempt takes the key over if the holder has not finished.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s (deadline in %v)", ErrInProgress.Error(), e.RetryAfter.Round(time.Millisecond))
	}
	return ErrInProgress.Error()
}

// Unwrap makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// replayedError carries a kept failure's message.
type replayedError struct{ msg string }

func (e *replayedError) Error() string { return e.msg }
func (e *replayedError) Unwrap() error { return ErrReplayedFailure }
