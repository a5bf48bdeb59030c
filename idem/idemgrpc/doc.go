// Package idemgrpc is idempotency for gRPC services: a unary server
// interceptor that runs a guarded method's handler once per idempotency key
// and gives every copy of the call the first one's answer, and a client
// interceptor that gives each call a key that survives gRPC's own retries.
//
//	store := redisstore.New(rdb) // or sqlstore, layered
//	methods := idemgrpc.WithMethods("/payments.v1.Payments/Charge")
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(idemgrpc.UnaryServerInterceptor(store, methods)),
//		grpc.ChainStreamInterceptor(idemgrpc.StreamServerInterceptor(methods)))
//	conn, err := grpc.NewClient(addr, creds,
//		grpc.WithChainUnaryInterceptor(idemgrpc.UnaryClientInterceptor(methods)))
//
// The guarantee is the idem package's: a key is claimed atomically, the
// handler runs once, its answer is recorded, and a claim whose process died
// is taken over only after its in-progress deadline. A payment that arrives
// three times in 200 ms is charged once; the copies get the first response
// message, or its final status, with the header idempotent-replayed: true.
//
// Defaults, each changed by an option: the key comes from the
// "idempotency-key" metadata (1 to 255 bytes of printable ASCII) and is
// required on guarded methods; it is scoped by a hash of the "authorization"
// metadata and the full method name; the fingerprint is the SHA-256 of the
// request's deterministic protobuf encoding; claims last 1 minute in progress
// and answers 24 hours; requests and recorded answers are capped at 1 MiB.
// No method is guarded unless named: gRPC has no verb that marks the calls
// with effects.
//
// Status codes, each refusal with a google.rpc.ErrorInfo detail: a copy of a
// call still running gets Aborted with google.rpc.RetryInfo; a key reused
// for another request gets FailedPrecondition (the request is valid, the
// key's state is what refuses it; a new key runs it); a missing or malformed
// key gets InvalidArgument; an unreachable store gets Unavailable. The
// transient codes (Canceled, DeadlineExceeded, Unavailable,
// ResourceExhausted, Aborted) are never recorded, so a retry runs; nor,
// by default, Unknown, Internal, DataLoss and Unimplemented. A handler's
// panic is answered Internal and releases the claim. Streaming methods that
// are named are refused with Unimplemented: a stream has no one request to
// fingerprint nor one answer to replay.
//
// Observers (WithObserver) see the same outcomes as idemhttp's; HTTPObserver
// feeds them to the metrics package's Prometheus collector and to
// latchkeyotel. Keys, principals and messages never reach them.
//
// docs/idempotency-grpc.md is the guide: the status mapping, the client's
// retries, and the decisions behind them.
package idemgrpc
