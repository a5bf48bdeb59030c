package idemgrpc

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// An Event reports one call of a guarded method. It carries no key,
// principal or message.
type Event struct {
	// Outcome says what the interceptor did, in idemhttp's terms, so that
	// the same dashboards count both: executed, released, replayed,
	// conflict (Aborted), mismatch (FailedPrecondition), bad_key
	// (InvalidArgument), bad_body (a request over the size cap, or not
	// protobuf), store_error (Unavailable), unkeyed (WithOptionalKey) and
	// canceled (the caller went away before the key was claimed).
	Outcome idemhttp.Outcome
	// Method is the full method name.
	Method string
	// Code is the status code answered: the handler's for executed and
	// released (Internal after a panic), the replayed one, or the
	// interceptor's own.
	Code codes.Code
	// Duration is the time from the call's arrival in the interceptor to
	// the end of its answer, recording included.
	Duration time.Duration
	// Err is a store failure behind the outcome: the claim's error for
	// store_error, a failed record or release after the handler ran, or an
	// unreadable stored answer. nil otherwise.
	Err error
	// Age is, for a replay, how long ago the answer was recorded, by the
	// recording and the replaying hosts' clocks (never below 0).
	Age time.Duration
}

// An Observer is told the outcome of every call of a guarded method, on the
// call's goroutine, after its answer is decided. It must be quick and safe
// for concurrent use.
type Observer func(ctx context.Context, e Event)

// WithObserver calls f with the outcome of every call of a guarded method.
// To count with the metrics package's Prometheus collector or trace with
// latchkeyotel, give it HTTPObserver of their idemhttp observers. Default:
// none.
func WithObserver(f Observer) Option {
	return func(c *config) { c.observe = f }
}

// HTTPObserver adapts an idemhttp.Observer, such as metrics.Idem's Observer
// or latchkeyotel's HTTPObserver, to gRPC calls, so that gRPC and HTTP
// guards share metrics, labels and span attributes. The observer gets a
// request that carries the call's context (and so its span), method POST
// and the full method name as its path, and an Event whose Status is the
// HTTP status google.rpc.Code maps the answered code to (Aborted 409,
// FailedPrecondition 400, Unavailable 503, ...).
func HTTPObserver(o idemhttp.Observer) Observer {
	return func(ctx context.Context, e Event) {
		r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: e.Method}, Header: http.Header{}}).WithContext(ctx)
		o(r, idemhttp.Event{Outcome: e.Outcome, Status: HTTPStatus(e.Code), Duration: e.Duration, Err: e.Err, Age: e.Age})
	}
}

// HTTPStatus is the HTTP status that google.rpc.Code documents for a gRPC
// status code.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed request
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss
}
