package idemgrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/latchkey-go/latchkey/idem"
)

// UnaryClientInterceptor gives every call of a guarded method (WithMethods
// or WithMethodFunc) a fresh key, NewKey, in its outgoing "idempotency-key"
// metadata (WithMetadataKey), unless the caller set one with WithKey.
//
// The key is set once per call, above gRPC's own retries: the retries of a
// service config's retryPolicy, and the transparent retry of a call that
// never reached the server, re-send the call's metadata, so they carry the
// same key and the server runs the handler once. A retry loop in your own
// code is another call and gets another key; give it one with WithKey. It
// panics on invalid options, as UnaryServerInterceptor does.
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(opts)
	if err := c.Err(); err != nil {
		panic("idemgrpc.UnaryClientInterceptor: " + err.Error())
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if c.methods(method) {
			md, _ := metadata.FromOutgoingContext(ctx)
			if len(md.Get(c.mdKey)) == 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, c.mdKey, NewKey())
			}
		}
		return invoker(ctx, method, req, reply, cc, callOpts...)
	}
}

// NewKey returns a fresh idempotency key: 128 random bits, hex-encoded.
func NewKey() string { return idem.NewToken() }

// WithKey returns ctx with key as the idempotency key of the calls made
// with it, under the default metadata key "idempotency-key" (give the name
// of WithMetadataKey to WithKeyIn otherwise). Use it to keep one key across
// a retry loop of your own: a charge retried after a timeout must carry the
// key of its first attempt. It returns ErrKeyTooLong or ErrKeyMalformed for
// a key the server would refuse.
func WithKey(ctx context.Context, key string) (context.Context, error) {
	return WithKeyIn(ctx, DefaultMetadataKey, key)
}

// WithKeyIn is WithKey for a metadata key other than the default.
func WithKeyIn(ctx context.Context, name, key string) (context.Context, error) {
	if err := checkMetadataKey(name); err != nil {
		return ctx, fmt.Errorf("idemgrpc: metadata key %q: %w", name, err)
	}
	if err := checkKey(key); err != nil {
		return ctx, err
	}
	return metadata.AppendToOutgoingContext(ctx, name, key), nil
}
