package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemgrpc"
)

const (
	unaryCall = grpc_testing.TestService_UnaryCall_FullMethodName
	emptyCall = grpc_testing.TestService_EmptyCall_FullMethodName
)

func TestMain(m *testing.M) {
	crashChild() // returns at once unless the test binary is a crash test's server
	os.Exit(m.Run())
}

// paySvc is grpc-go's interop TestService whose UnaryCall charges once per
// run and counts the runs.
type paySvc struct {
	grpc_testing.UnimplementedTestServiceServer
	calls atomic.Int32
	gate  chan struct{} // if set, each run waits for it to close
	// answer, if set, replaces the charge; n counts the runs from 1.
	answer func(ctx context.Context, req *grpc_testing.SimpleRequest, n int32) (*grpc_testing.SimpleResponse, error)
}

func (p *paySvc) UnaryCall(ctx context.Context, req *grpc_testing.SimpleRequest) (*grpc_testing.SimpleResponse, error) {
	n := p.calls.Add(1)
	if p.gate != nil {
		<-p.gate
	}
	if p.answer != nil {
		return p.answer(ctx, req, n)
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("charge-id", fmt.Sprint(n)))
	return &grpc_testing.SimpleResponse{Username: fmt.Sprintf("charge-%d", n), Payload: req.GetPayload()}, nil
}

func (p *paySvc) EmptyCall(context.Context, *grpc_testing.Empty) (*grpc_testing.Empty, error) {
	p.calls.Add(1)
	return &grpc_testing.Empty{}, nil
}

// serve starts a gRPC server for svc on a loopback port, guarded by an
// idemgrpc interceptor on store, and returns its address.
func serve(t testing.TB, svc grpc_testing.TestServiceServer, store idem.Store, opts ...idemgrpc.Option) string {
	t.Helper()
	opts = append([]idemgrpc.Option{idemgrpc.WithMethods(unaryCall)}, opts...)
	return serveWith(t, svc,
		grpc.ChainUnaryInterceptor(idemgrpc.UnaryServerInterceptor(store, opts...)),
		grpc.ChainStreamInterceptor(idemgrpc.StreamServerInterceptor(opts...)))
}

// serveWith starts a server with the given server options.
func serveWith(t testing.TB, svc grpc_testing.TestServiceServer, sopts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	grpc_testing.RegisterTestServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// dial returns a client of the server at addr, closed by t.Cleanup.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) grpc_testing.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return grpc_testing.NewTestServiceClient(cc)
}

// call is one answered call: the response or status, and its header.
type call struct {
	resp   *grpc_testing.SimpleResponse
	st     *status.Status
	header metadata.MD
}

func (c call) replayed() bool { return len(c.header.Get(idemgrpc.ReplayedMetadataKey)) == 1 }

// pay calls UnaryCall with the key (none if "") and the body.
func pay(t testing.TB, c grpc_testing.TestServiceClient, key, body string, md ...string) call {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultMetadataKey, key)
	}
	var header metadata.MD
	resp, err := c.UnaryCall(ctx, &grpc_testing.SimpleRequest{Payload: &grpc_testing.Payload{Body: []byte(body)}}, grpc.Header(&header))
	return call{resp: resp, st: status.Convert(err), header: header}
}

// wantCode fails unless the call answered code with the given reason.
func wantCode(t testing.TB, c call, code codes.Code, reason string) {
	t.Helper()
	if c.st.Code() != code {
		t.Fatalf("code %v (%q), want %v", c.st.Code(), c.st.Message(), code)
	}
	if reason == "" {
		return
	}
	if got := reasonOf(c.st); got != reason {
		t.Fatalf("reason %q, want %q (status %v)", got, reason, c.st)
	}
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetDomain() != idemgrpc.ErrorDomain {
				return "domain " + info.GetDomain()
			}
			return info.GetReason()
		}
	}
	return ""
}

func retryInfo(st *status.Status) (time.Duration, error) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), nil
		}
	}
	return 0, errors.New("no RetryInfo detail")
}
