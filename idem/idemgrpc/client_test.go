package idemgrpc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// retryPolicy retries UnaryCall on Unavailable, the way a client is told to
// ride out a server restart.
const retryPolicy = `{"methodConfig":[{"name":[{"service":"grpc.testing.TestService","method":"UnaryCall"}],
 "retryPolicy":{"maxAttempts":3,"initialBackoff":"0.01s","maxBackoff":"0.05s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// keysSeen records the idempotency key of every attempt that reaches the
// server.
type keysSeen struct {
	mu   sync.Mutex
	keys []string
}

func (k *keysSeen) add(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, md.Get(idemgrpc.DefaultMetadataKey)...)
}

func (k *keysSeen) get() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

func retryingClient(t *testing.T, addr string) grpc_testing.TestServiceClient {
	return dial(t, addr, grpc.WithDefaultServiceConfig(retryPolicy),
		grpc.WithChainUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.WithMethods(unaryCall))))
}

func sameKeyTwice(t *testing.T, keys []string) {
	t.Helper()
	if len(keys) != 2 || keys[0] != keys[1] || len(keys[0]) != 32 {
		t.Fatalf("attempts carried keys %q, want one 32-hex-digit key twice", keys)
	}
}

// The handler fails its first attempt with Unavailable; gRPC's retry policy
// re-sends the call, below the client interceptor, with the same key; the
// retry runs the handler, which takes effect once.
func TestClientKeySurvivesRetryPolicy(t *testing.T) {
	var seen keysSeen
	var effects int
	svc := &paySvc{}
	svc.answer = func(ctx context.Context, _ *grpc_testing.SimpleRequest, n int32) (*grpc_testing.SimpleResponse, error) {
		seen.add(ctx)
		if n == 1 {
			return nil, status.Error(codes.Unavailable, "ledger failing over")
		}
		effects++
		return &grpc_testing.SimpleResponse{Username: "charged"}, nil
	}
	c := retryingClient(t, serve(t, svc, memstore.New()))
	got := pay(t, c, "", "100 EUR") // the interceptor adds the key
	wantCode(t, got, codes.OK, "")
	sameKeyTwice(t, seen.get())
	if effects != 1 || svc.calls.Load() != 2 {
		t.Fatalf("%d effects in %d runs, want 1 in 2", effects, svc.calls.Load())
	}
}

// The answer is lost after the charge (a proxy between client and server
// fails with Unavailable): the retry, with the same key, gets the recorded
// answer and the handler does not run again.
func TestClientRetryAfterLostAnswerIsReplayed(t *testing.T) {
	var seen keysSeen
	var mu sync.Mutex
	attempts := 0
	loseFirst := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		seen.add(ctx)
		resp, err := h(ctx, req)
		mu.Lock()
		defer mu.Unlock()
		if attempts++; attempts == 1 {
			return nil, status.Error(codes.Unavailable, "connection reset after the charge")
		}
		return resp, err
	}
	// No header metadata: a server that sent headers has committed the call,
	// and gRPC does not retry it.
	svc := &paySvc{answer: func(_ context.Context, _ *grpc_testing.SimpleRequest, n int32) (*grpc_testing.SimpleResponse, error) {
		return &grpc_testing.SimpleResponse{Username: fmt.Sprintf("charge-%d", n)}, nil
	}}
	addr := serveWith(t, svc, grpc.ChainUnaryInterceptor(loseFirst,
		idemgrpc.UnaryServerInterceptor(memstore.New(), idemgrpc.WithMethods(unaryCall))))
	got := pay(t, retryingClient(t, addr), "", "100 EUR")
	wantCode(t, got, codes.OK, "")
	sameKeyTwice(t, seen.get())
	if !got.replayed() || got.resp.GetUsername() != "charge-1" || svc.calls.Load() != 1 {
		t.Fatalf("retry got %v (replayed %v), %d runs; want the first charge replayed", got.resp, got.replayed(), svc.calls.Load())
	}
}

// Calls are not retries of each other: each gets its own key, and a key the
// caller set is kept.
func TestClientKeyPerCall(t *testing.T) {
	var seen keysSeen
	svc := &paySvc{}
	svc.answer = func(ctx context.Context, _ *grpc_testing.SimpleRequest, _ int32) (*grpc_testing.SimpleResponse, error) {
		seen.add(ctx)
		return &grpc_testing.SimpleResponse{}, nil
	}
	c := retryingClient(t, serve(t, svc, memstore.New()))
	wantCode(t, pay(t, c, "", "1"), codes.OK, "")
	wantCode(t, pay(t, c, "", "1"), codes.OK, "")
	ctx, err := idemgrpc.WithKey(context.Background(), "order-1001")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnaryCall(ctx, &grpc_testing.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	keys := seen.get()
	if len(keys) != 3 || keys[0] == keys[1] || keys[2] != "order-1001" {
		t.Fatalf("keys %q: want two distinct fresh keys and the caller's", keys)
	}
	if _, err := idemgrpc.WithKey(context.Background(), "bad\nkey"); err == nil {
		t.Fatal("WithKey accepted a key with a control byte")
	}
}
