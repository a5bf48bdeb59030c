package idemgrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// UnaryServerInterceptor guards the unary methods named by WithMethods or
// WithMethodFunc with the key in each call's "idempotency-key" metadata. For
// a guarded call it answers:
//
//	first call with a key            runs the handler, records its response or final status
//	same key, same request, finished replays the response or status, with header idempotent-replayed: true
//	same key, call still running     Aborted with RetryInfo (or, with WithWait, waits and replays)
//	same key, different request      FailedPrecondition
//	no key (unless WithOptionalKey)  InvalidArgument
//	malformed key, or > 255 bytes    InvalidArgument
//	request over WithMaxRequestSize  ResourceExhausted
//	store unreachable                Unavailable with RetryInfo; the handler does not run
//	handler panicked                 Internal; nothing recorded, the claim released
//
// The transient codes Canceled, DeadlineExceeded, Unavailable,
// ResourceExhausted and Aborted, and Unauthenticated, are never recorded,
// nor by default Unknown, Internal, DataLoss and Unimplemented (see
// WithRecordCode): the claim is released and a retry runs the handler again.
// Every status the interceptor answers itself carries a google.rpc.ErrorInfo
// detail (domain ErrorDomain, reason ReasonKeyMissing and the others).
//
// Keys are scoped by principal (WithPrincipal) and the full method name; the
// fingerprint is the SHA-256 of the request's deterministic protobuf
// encoding and its message type. The handler's context ends at the
// in-progress deadline; the answer is recorded with a context detached from
// the caller's, so a client that hangs up does not leave its payment
// unrecorded. Header and trailer metadata the handler sets are recorded and
// replayed with the answer.
//
// UnaryServerInterceptor panics, naming each bad option, when an option is
// invalid, no method is guarded, or store is nil: a misconfigured guard never
// serves a call. NewUnaryServerInterceptor returns the error instead.
func UnaryServerInterceptor(store idem.Store, opts ...Option) grpc.UnaryServerInterceptor {
	i, err := NewUnaryServerInterceptor(store, opts...)
	if err != nil {
		panic("idemgrpc.UnaryServerInterceptor: " + err.Error())
	}
	return i
}

// NewUnaryServerInterceptor is UnaryServerInterceptor returning an error,
// wrapping idem.ErrInvalid and naming each bad option, for an invalid
// option, no guarded method, or a nil store.
func NewUnaryServerInterceptor(store idem.Store, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	c := newConfig(opts)
	if store == nil {
		c.Invalid = append(c.Invalid, fmt.Errorf("%w: nil store", idem.ErrInvalid))
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	s := &server{c: c, store: store}
	return s.intercept, nil
}

// StreamServerInterceptor refuses every call of a guarded streaming method
// with Unimplemented (reason ReasonStreaming) and passes the others
// through. A stream has no one request to fingerprint nor one answer to
// replay, so it cannot be made idempotent here; make the operation a unary
// method, or give its messages ids and deduplicate them in the handler. It
// panics on invalid options, as UnaryServerInterceptor does.
func StreamServerInterceptor(opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(opts)
	if err := c.Err(); err != nil {
		panic("idemgrpc.StreamServerInterceptor: " + err.Error())
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !c.methods(info.FullMethod) {
			return handler(srv, ss)
		}
		return refusal(codes.Unimplemented, ReasonStreaming,
			"idemgrpc: "+info.FullMethod+" is a streaming method, and idempotency keys are defined for unary calls only; it was not run", 0)
	}
}

type server struct {
	c     *config
	store idem.Store
}

func (s *server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.c.methods(info.FullMethod) {
		return handler(ctx, req)
	}
	if s.c.observe == nil {
		var ev Event
		return s.guard(ctx, req, info.FullMethod, handler, &ev)
	}
	ev := Event{Method: info.FullMethod}
	start := time.Now()
	resp, err := s.guard(ctx, req, info.FullMethod, handler, &ev)
	ev.Duration = time.Since(start)
	if ev.Code == codes.OK && err != nil {
		ev.Code = statusOf(err).Code()
	}
	s.c.observe(ctx, ev)
	return resp, err
}

// guard is the cycle for one guarded call; it says in ev what it did.
func (s *server) guard(ctx context.Context, req any, method string, handler grpc.UnaryHandler, ev *Event) (any, error) {
	key, err := s.key(ctx, ev)
	if err != nil || key == "" {
		if err == nil { // WithOptionalKey
			ev.Outcome = idemhttp.OutcomeUnkeyed
			return handler(ctx, req)
		}
		return nil, err
	}
	fp, err := fingerprint(method, req, s.c.maxRequest)
	if err != nil {
		ev.Outcome = idemhttp.OutcomeBadBody
		return nil, err
	}
	scoped := storeKey(s.c.principal(ctx), method, key)
	run, replay, err := idem.Begin(ctx, s.store, scoped, fp, s.c.Idem...)
	switch {
	case err != nil:
		return nil, s.refuseClaim(ctx, method, err, ev)
	case replay != nil:
		ev.Outcome = idemhttp.OutcomeReplayed
		return s.replay(ctx, method, replay.Result, ev)
	}
	return s.execute(ctx, req, method, run, handler, ev)
}

// key reads and checks the call's key; "" and no error when the key is
// missing and optional.
func (s *server) key(ctx context.Context, ev *Event) (string, error) {
	key, err := incomingKey(ctx, s.c.mdKey)
	switch {
	case errors.Is(err, ErrKeyTooLong):
		ev.Outcome = idemhttp.OutcomeBadKey
		return "", refusal(codes.InvalidArgument, ReasonKeyTooLong, "idemgrpc: the idempotency key is longer than 255 bytes", 0)
	case err != nil:
		ev.Outcome = idemhttp.OutcomeBadKey
		return "", refusal(codes.InvalidArgument, ReasonKeyMalformed, err.Error(), 0)
	case key == "" && !s.c.optional:
		ev.Outcome = idemhttp.OutcomeBadKey
		return "", refusal(codes.InvalidArgument, ReasonKeyMissing, "idemgrpc: this call needs an idempotency key in metadata "+s.c.mdKey, 0)
	}
	return key, nil
}

// fingerprint is the SHA-256 of the request's message type and its
// deterministic encoding, refused when the encoding is over max bytes.
func fingerprint(method string, req any, max int) (string, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return "", refusal(codes.Internal, ReasonNotProto, fmt.Sprintf("idemgrpc: request of type %T is not a protocol buffer message", req), 0)
	}
	if n := proto.Size(m); n > max {
		return "", refusal(codes.ResourceExhausted, ReasonRequestTooLarge,
			fmt.Sprintf("idemgrpc: the request message has %d bytes, more than the %d an idempotent call may have; it was not run", n, max), 0)
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return "", refusal(codes.Internal, ReasonNotProto, "idemgrpc: encoding the request: "+err.Error(), 0)
	}
	head := idem.Key(method, string(m.ProtoReflect().Descriptor().FullName()))
	sum := sha256.Sum256(append(append([]byte(head), 0), b...))
	return hex.EncodeToString(sum[:]), nil
}

// refuseClaim is the status of a claim that failed with err.
func (s *server) refuseClaim(ctx context.Context, method string, err error, ev *Event) error {
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		ev.Outcome = idemhttp.OutcomeConflict
		return refusal(codes.Aborted, ReasonInProgress, "idemgrpc: a call with this idempotency key is still being processed", retryDelay(inProgress.RetryAfter))
	case errors.Is(err, idem.ErrFingerprintMismatch):
		ev.Outcome = idemhttp.OutcomeMismatch
		return refusal(codes.FailedPrecondition, ReasonKeyReused, "idemgrpc: this idempotency key was used for a different request", 0)
	case errors.Is(err, idem.ErrInvalidKey):
		ev.Outcome = idemhttp.OutcomeBadKey
		return refusal(codes.InvalidArgument, ReasonKeyMalformed, err.Error(), 0)
	case ctx.Err() != nil:
		ev.Outcome = idemhttp.OutcomeCanceled
		return status.FromContextError(ctx.Err()).Err()
	}
	ev.Outcome, ev.Err = idemhttp.OutcomeStoreError, err
	s.c.log().ErrorContext(ctx, "idemgrpc: claim", "method", method, "err", err)
	return refusal(codes.Unavailable, ReasonStoreUnavailable, "idemgrpc: the idempotency store is unavailable; the call was not processed", time.Second)
}

// replay answers a recorded outcome.
func (s *server) replay(ctx context.Context, method string, b []byte, ev *Event) (any, error) {
	r, err := decodeRecord(b)
	if err == nil {
		ev.Age = r.age(time.Now())
		md := metadata.Join(r.Header, metadata.Pairs(ReplayedMetadataKey, "true"))
		_ = grpc.SetHeader(ctx, md) // fails only outside a gRPC server, as in a direct call
		if len(r.Trailer) > 0 {
			_ = grpc.SetTrailer(ctx, r.Trailer)
		}
		if r.Omitted {
			return nil, refusal(codes.Internal, ReasonNotRetained,
				"idemgrpc: the call was processed, but its answer was too large to keep for replay; it was not processed again", 0)
		}
		var resp any
		var st *status.Status
		if resp, st, err = r.answer(); err == nil {
			if st != nil {
				return nil, st.Err()
			}
			return resp, nil
		}
	}
	ev.Err = err
	s.c.log().ErrorContext(ctx, "idemgrpc: reading a stored answer", "method", method, "err", err)
	return nil, refusal(codes.Internal, ReasonNotRetained, "idemgrpc: the stored answer cannot be read; the call was not processed again", 0)
}

// execute runs the handler under the claim and records or releases it.
func (s *server) execute(ctx context.Context, req any, method string, run *idem.Run, handler grpc.UnaryHandler, ev *Event) (any, error) {
	rctx, cancel := run.Context(ctx)
	defer cancel()
	rctx, md := captureMetadata(rctx)
	resp, p, err := callHandler(rctx, req, handler)
	if p != nil {
		ev.Outcome, ev.Code = idemhttp.OutcomeReleased, codes.Internal
		s.c.log().ErrorContext(ctx, "idemgrpc: handler panicked", "method", method, "panic", p.value, "stack", string(p.stack))
		ev.Err = s.release(ctx, method, run)
		return nil, refusal(codes.Internal, ReasonPanicked, "idemgrpc: the handler failed; nothing was recorded, and a retry runs it again", 0)
	}
	st := statusOf(err)
	ev.Code = st.Code() // OK for a nil status
	if !s.keep(st) {
		ev.Outcome = idemhttp.OutcomeReleased
		ev.Err = s.release(ctx, method, run)
		return resp, err
	}
	ev.Outcome = idemhttp.OutcomeExecuted
	b, encErr := encodeAnswer(resp, st, md, s.c.maxResponse, time.Now())
	if encErr != nil {
		// The effect happened but cannot be replayed: record that, so a
		// copy is refused rather than run again.
		s.c.log().ErrorContext(ctx, "idemgrpc: answer not retained", "method", method, "err", encErr)
		b = omittedRecord(time.Now())
	}
	if rerr := idem.Finish(ctx, func(c context.Context) error { return run.Record(c, b) }); rerr != nil {
		s.c.log().ErrorContext(ctx, "idemgrpc: answer not recorded", "method", method, "err", fmt.Errorf("%w: %w", idem.ErrNotRecorded, rerr))
		ev.Err = rerr
	}
	return resp, err
}

// keep says whether an answer with status st (nil: OK) is recorded.
func (s *server) keep(st *status.Status) bool {
	c := st.Code()
	return c == codes.OK || !neverRecorded(c) && s.c.record(c)
}

// release gives the claim up, logging and returning a failure.
func (s *server) release(ctx context.Context, method string, run *idem.Run) error {
	err := idem.Finish(ctx, run.Release)
	if err != nil {
		s.c.log().ErrorContext(ctx, "idemgrpc: releasing claim", "method", method, "err", err)
	}
	return err
}

// panicValue is a handler's panic, caught.
type panicValue struct {
	value any
	stack []byte
}

// callHandler runs the handler and catches its panic: an uncaught panic in
// a gRPC handler ends the whole server process, and with it every other
// call in flight.
func callHandler(ctx context.Context, req any, handler grpc.UnaryHandler) (resp any, p *panicValue, err error) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicValue{value: v, stack: debug.Stack()}
		}
	}()
	resp, err = handler(ctx, req)
	return resp, nil, err
}
