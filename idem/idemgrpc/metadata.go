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
	if err := c.ServerTransportStream.SetHeader(md); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = metadata.Join(c.header, md)
	return nil
}

// SendHeader implements grpc.ServerTransportStream.
func (c *capturedMD) SendHeader(md metadata.MD) error {
	if err := c.ServerTransportStream.SendHeader(md); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = metadata.Join(c.header, md)
	return nil
}

// SetTrailer implements grpc.ServerTransportStream.
func (c *capturedMD) SetTrailer(md metadata.MD) error {
	if err := c.ServerTransportStream.SetTrailer(md); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trailer = metadata.Join(c.trailer, md)
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
