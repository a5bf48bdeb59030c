package dedup

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers test for them with errors.Is; context errors are
// returned as they are, and a handler's own error is returned unchanged.
var (
	// ErrInProgress means another consumer is processing a copy of the
	// message. This copy was neither processed nor marked done: do not
	// acknowledge it; negatively acknowledge it with a delay or leave it for
	// redelivery. The error is an [*InProgressError] carrying the delay.
	ErrInProgress = errors.New("dedup: message in progress")

	// ErrNotRecorded means the handler succeeded but the message could not be
	// marked done (the store failed, or the claim expired and was taken
	// over). The effect happened: acknowledge the message, since a
	// redelivery could be processed again once the claim is gone.
	ErrNotRecorded = errors.New("dedup: processed but not marked done")

	// ErrClaimLost means a Done or Release came from a consumer whose claim
	// had expired and been taken over, or was deleted behind the store's back.
	ErrClaimLost = errors.New("dedup: claim lost")

	// ErrInvalidID means a message id is empty, longer than MaxIDLen, or not
	// printable UTF-8. Nothing was sent to the store.
	ErrInvalidID = errors.New("dedup: invalid message id")

	// ErrNotFound means a store holds no mark for a message id: it was never
	// claimed, or was released, forgotten, or aged out. The next copy of the
	// message is processed. For a Bloom filter it means "not seen", which a
	// Bloom filter answers without error.
	ErrNotFound = errors.New("dedup: no mark for this message id")

	// ErrCannotForget means a store cannot forget one message id: a Bloom
	// filter's bits are shared by many ids. Nothing was changed.
	ErrCannotForget = errors.New("dedup: this store cannot forget a message id")

	// ErrInvalid wraps every other bad argument (nil store or handler,
	// durations out of range). Nothing was sent to the store.
	ErrInvalid = errors.New("dedup: invalid argument")
)

// InProgressError is returned for a copy that arrived while another copy of
// the same message was processing. It matches [ErrInProgress] with errors.Is.
type InProgressError struct {
	// RetryAfter is the time left on the other consumer's claim, as the store
	// sees it; 0 when unknown. By then the other copy is done, released, or
	// its claim has expired, so redelivering after it makes progress.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s (claim ends in %v)", ErrInProgress.Error(), e.RetryAfter.Round(time.Millisecond))
	}
	return ErrInProgress.Error()
}

// Unwrap makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// ShouldAck reports whether an adapter should acknowledge a delivery after
// the wrapped handler returned err: true for nil (processed now, or a
// duplicate of a processed message) and for ErrNotRecorded (the effect
// happened), false otherwise (the handler failed and its claim was released,
// or another copy is in progress: see [RetryAfter]).
func ShouldAck(err error) bool {
	return err == nil || errors.Is(err, ErrNotRecorded)
}

// RetryAfter returns the delay an adapter should give a negative
// acknowledgement for err: the claim's remaining time for an
// [*InProgressError], 0 otherwise.
func RetryAfter(err error) time.Duration {
	var ip *InProgressError
	if errors.As(err, &ip) {
		return ip.RetryAfter
	}
	return 0
}
