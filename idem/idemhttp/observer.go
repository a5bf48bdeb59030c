package idemhttp

import (
	"log/slog"
	"net/http"
	"time"
)

// Outcome is what the middleware did with one guarded request.
type Outcome int

// The outcomes an Observer is told of.
const (
	// OutcomeExecuted: the handler ran and its response was recorded for
	// replay (Event.Err is set when recording failed).
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReleased: the handler ran but its response is not kept (5xx,
	// 401, 429, a panic or a hijacked connection): the claim was released so
	// a retry runs the handler again (Event.Err is set when releasing failed).
	OutcomeReleased
	// OutcomeReplayed: a recorded response was replayed; the handler did not
	// run.
	OutcomeReplayed
	// OutcomeConflict: 409, a copy of the request is still running.
	OutcomeConflict
	// OutcomeMismatch: 422, the key was used for a different request.
	OutcomeMismatch
	// OutcomeBadKey: 400, the key is missing, malformed or too long.
	OutcomeBadKey
	// OutcomeBadBody: 413 or 400, the body is too large or unreadable.
	OutcomeBadBody
	// OutcomeStoreError: 503, the store could not be reached to claim the
	// key; the handler did not run. Event.Err is the store's error.
	OutcomeStoreError
	// OutcomeUnkeyed: no key, and WithOptionalKey let the request through
	// unguarded.
	OutcomeUnkeyed
	// OutcomeCanceled: the client went away before the key was claimed;
	// nothing ran and nothing was answered.
	OutcomeCanceled
)

// String returns the outcome in lower case with underscores ("executed",
// "bad_key", ...), fit for a metric label.
func (o Outcome) String() string {
	switch o {
	case OutcomeExecuted:
		return "executed"
	case OutcomeReleased:
		return "released"
	case OutcomeReplayed:
		return "replayed"
	case OutcomeConflict:
		return "conflict"
	case OutcomeMismatch:
		return "mismatch"
	case OutcomeBadKey:
		return "bad_key"
	case OutcomeBadBody:
		return "bad_body"
	case OutcomeStoreError:
		return "store_error"
	case OutcomeUnkeyed:
		return "unkeyed"
	case OutcomeCanceled:
		return "canceled"
	}
	return "invalid"
}

// An Event reports one guarded request. It carries no key, token or body.
type Event struct {
	// Outcome says what the middleware did.
	Outcome Outcome
	// Status is the status answered: the handler's for OutcomeExecuted and
	// OutcomeReleased (0 after a panic or a hijack), the replayed one for
	// OutcomeReplayed, the middleware's own otherwise.
	Status int
	// Duration is the time from the request's arrival in the middleware to
	// the end of its answer (recording included).
	Duration time.Duration
	// Err is a store failure behind the outcome: the claim's error for
	// OutcomeStoreError, a failed record or release after the handler ran,
	// or an unreadable stored response. nil otherwise.
	Err error
	// Age is, for OutcomeReplayed, how long ago the replayed response was
	// recorded, by the recording and the replaying hosts' clocks (never
	// below 0); 0 for a response recorded before records kept their time.
	Age time.Duration
}

// An Observer is told the outcome of every guarded request, after its answer
// is written, on the request's goroutine. It must be safe for concurrent use.
type Observer func(r *http.Request, e Event)

// WithObserver calls f with the outcome of every guarded request (requests
// of unguarded methods are not reported), to count executions, replays,
// 409s, 422s and store errors; the metrics package has a Prometheus
// collector that provides f. Default: none.
func WithObserver(f Observer) Option {
	return func(c *config) { c.observe = f }
}

// WithLogger sets the logger of the default error handler (see
// WithErrorHandler), which logs the method, the path and the error at Error
// level; keys, tokens and bodies are never logged. Default: slog.Default(),
// looked up at each record.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}
