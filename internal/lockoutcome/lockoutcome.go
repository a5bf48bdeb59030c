// Package lockoutcome names how a lock Acquire call ended, as the metrics
// and OpenTelemetry integrations label it.
package lockoutcome

import (
	"context"
	"errors"

	"github.com/latchkey-go/latchkey/lock"
)

// Names are the outcomes, by the index Of returns: acquired, not_acquired,
// canceled (ctx done), invalid and error.
var Names = [...]string{"acquired", "not_acquired", "canceled", "invalid", "error"}

// Of returns the index in Names of the outcome of an Acquire call that
// returned err.
func Of(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, lock.ErrNotAcquired):
		return 1
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 2
	case errors.Is(err, lock.ErrInvalid):
		return 3
	}
	return 4
}
