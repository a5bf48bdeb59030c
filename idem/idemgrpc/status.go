package idemgrpc

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// status the server interceptor answers itself.
const ErrorDomain = "latchkey.idem"

// Reasons, in the google.rpc.ErrorInfo detail of every status the server
// interceptor answers itself, so clients can tell the cases apart (as
// idemhttp's problem codes do).
const (
	ReasonKeyMissing       = "IDEMPOTENCY_KEY_MISSING"       // InvalidArgument
	ReasonKeyMalformed     = "IDEMPOTENCY_KEY_MALFORMED"     // InvalidArgument
	ReasonKeyTooLong       = "IDEMPOTENCY_KEY_TOO_LONG"      // InvalidArgument
	ReasonKeyReused        = "IDEMPOTENCY_KEY_REUSED"        // FailedPrecondition
	ReasonInProgress       = "REQUEST_IN_PROGRESS"           // Aborted, with RetryInfo
	ReasonRequestTooLarge  = "REQUEST_TOO_LARGE"             // ResourceExhausted
	ReasonNotProto         = "MESSAGE_NOT_PROTOBUF"          // Internal
	ReasonStoreUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE" // Unavailable, with RetryInfo
	ReasonNotRetained      = "RESPONSE_NOT_RETAINED"         // Internal, on a replay
	ReasonPanicked         = "HANDLER_PANICKED"              // Internal
	ReasonStreaming        = "STREAMING_NOT_SUPPORTED"       // Unimplemented
)

// refusal is a status with an ErrorInfo detail and, when retry > 0, a
// RetryInfo detail saying when to try again.
func refusal(c codes.Code, reason, msg string, retry time.Duration) error {
	st := status.New(c, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}}
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// retryDelay is d rounded up to the millisecond, at least 1 ms: a copy
// retried after it finds the claim finished or taken over.
func retryDelay(d time.Duration) time.Duration {
	return max(d.Round(time.Millisecond), time.Millisecond)
}

// statusOf is the status gRPC sends for a handler's error (nil for none):
// a status error as it is, a context error as its code, anything else as
// Unknown.
func statusOf(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}

// neverRecorded are the codes that say a call did not complete, or was
// refused for a reason of the moment (credentials, load, a conflict): a
// retry must run the handler again.
func neverRecorded(c codes.Code) bool {
	switch c {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted,
		codes.Aborted, codes.Unauthenticated:
		return true
	}
	return false
}

// DefaultRecordCode is the default of WithRecordCode: every final answer is
// recorded except the server failures Unknown (a plain Go error), Internal,
// DataLoss and Unimplemented, which, like HTTP's 5xx, say the handler may
// not have finished; their claim is released so a retry runs the handler
// again. Record them (return true) when the handler may have taken effect
// before failing.
func DefaultRecordCode(c codes.Code) bool {
	switch c {
	case codes.Unknown, codes.Internal, codes.DataLoss, codes.Unimplemented:
		return false
	}
	return true
}
