package idemgrpc

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// capturedMD forwards the header and trailer metadata a handler sets and
// keeps a copy, so that a replay answers with them too.
type capturedMD struct {
	grpc.ServerTransportStream
	mu      sync.Mutex
	header  metadata.MD // guarded by mu
	trailer metadata.MD // guarded by mu
}

// captureMetadata returns ctx with a stream that records what the handler
// sets, or ctx and nil outside a gRPC server.
func captureMetadata(ctx context.Context) (context.Context, *capturedMD) {
	inner := grpc.ServerTransportStreamFromContext(ctx)
	if inner == nil {
		return ctx, nil
	}
	c := &capturedMD{ServerTransportStream: inner}
	return grpc.NewContextWithServerTransportStream(ctx, c), c
}

// SetHeader implements grpc.ServerTransportStream.
func (c *capturedMD) SetHeader(md metadata.MD) error {
	return c.keep(&c.header, md, c.ServerTransportStream.SetHeader(md))
}

// SendHeader implements grpc.ServerTransportStream.
func (c *capturedMD) SendHeader(md metadata.MD) error {
	return c.keep(&c.header, md, c.ServerTransportStream.SendHeader(md))
}

// SetTrailer implements grpc.ServerTransportStream.
func (c *capturedMD) SetTrailer(md metadata.MD) error {
	return c.keep(&c.trailer, md, c.ServerTransportStream.SetTrailer(md))
}

// keep adds md to *kept, c's header or trailer, once the inner stream has
// taken it (err, its answer, is nil), and returns err.
func (c *capturedMD) keep(kept *metadata.MD, md metadata.MD, err error) error {
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	*kept = metadata.Join(*kept, md)
	return nil
}

// snapshot returns copies of the header and trailer set so far.
func (c *capturedMD) snapshot() (header, trailer metadata.MD) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header.Copy(), c.trailer.Copy()
}
