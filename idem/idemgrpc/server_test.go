package idemgrpc_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/internal/flakystore"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// A payment retried twice is charged once; both copies get the first
// response, its header metadata, and the replay header.
func TestReplayReturnsTheFirstResponse(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New()))
	first := pay(t, c, "k-1", "100 EUR")
	wantCode(t, first, codes.OK, "")
	if first.replayed() {
		t.Fatal("the first call is marked as a replay")
	}
	for range 2 {
		again := pay(t, c, "k-1", "100 EUR")
		wantCode(t, again, codes.OK, "")
		if !again.replayed() {
			t.Fatalf("a copy lacks %s: true (header %v)", idemgrpc.ReplayedMetadataKey, again.header)
		}
		if !proto.Equal(again.resp, first.resp) {
			t.Fatalf("replayed %v, first answered %v", again.resp, first.resp)
		}
		if got := again.header.Get("charge-id"); len(got) != 1 || got[0] != "1" {
			t.Fatalf("replayed header charge-id %q, want the first call's [1]", got)
		}
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// The same key from another principal, or on another method, is another
// call: scopes never meet.
func TestKeysAreScopedByPrincipal(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New()))
	a := pay(t, c, "k-1", "100 EUR", "authorization", "Bearer alice")
	b := pay(t, c, "k-1", "100 EUR", "authorization", "Bearer bob")
	wantCode(t, a, codes.OK, "")
	wantCode(t, b, codes.OK, "")
	if b.replayed() || proto.Equal(a.resp, b.resp) || svc.calls.Load() != 2 {
		t.Fatalf("bob got alice's answer: %v / %v, %d runs", a.resp, b.resp, svc.calls.Load())
	}
}

func TestSameKeyAnotherRequestIsRefused(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New()))
	wantCode(t, pay(t, c, "k-1", "100 EUR"), codes.OK, "")
	wantCode(t, pay(t, c, "k-1", "900 EUR"), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestMissingKeyIsRefused(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New()))
	wantCode(t, pay(t, c, "", "100 EUR"), codes.InvalidArgument, idemgrpc.ReasonKeyMissing)
	if n := svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times without a key", n)
	}
	// An unguarded method needs none.
	if _, err := c.EmptyCall(context.Background(), &grpc_testing.Empty{}); err != nil {
		t.Fatalf("unguarded EmptyCall: %v", err)
	}
}

func TestOptionalKeyLetsUnkeyedCallsThrough(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New(), idemgrpc.WithOptionalKey()))
	wantCode(t, pay(t, c, "", "1"), codes.OK, "")
	wantCode(t, pay(t, c, "", "1"), codes.OK, "")
	if n := svc.calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 unguarded runs", n)
	}
}

func TestBadKeysAreRefused(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New()))
	wantCode(t, pay(t, c, strings.Repeat("k", idemgrpc.MaxKeyLen+1), "1"), codes.InvalidArgument, idemgrpc.ReasonKeyTooLong)
	wantCode(t, pay(t, c, strings.Repeat("k", 64<<10), "1"), codes.InvalidArgument, idemgrpc.ReasonKeyTooLong)
	wantCode(t, pay(t, c, "", "1", "idempotency-key", "a", "idempotency-key", "b"), codes.InvalidArgument, idemgrpc.ReasonKeyMalformed)
	wantCode(t, pay(t, c, strings.Repeat("k", idemgrpc.MaxKeyLen), "1"), codes.OK, "")
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (for the 255-byte key only)", n)
	}
}

// grpc-go's client refuses control bytes in metadata before sending, so the
// server's check is called directly, as another client's call would reach it.
func TestControlBytesInKeyAreRefused(t *testing.T) {
	i := idemgrpc.UnaryServerInterceptor(memstore.New(), idemgrpc.WithMethods(unaryCall))
	ran := false
	h := func(context.Context, any) (any, error) { ran = true; return &grpc_testing.SimpleResponse{}, nil }
	for _, k := range []string{"pay\x00ment", "pay\nment", "pay\x7fment", "paiement-été", ""} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.DefaultMetadataKey, k))
		_, err := i(ctx, &grpc_testing.SimpleRequest{}, &grpc.UnaryServerInfo{FullMethod: unaryCall}, h)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("key %q: %v, want InvalidArgument", k, err)
		}
	}
	if ran {
		t.Fatal("the handler ran for a malformed key")
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New(), idemgrpc.WithMaxRequestSize(1024)))
	wantCode(t, pay(t, c, "k-big", strings.Repeat("x", 2048)), codes.ResourceExhausted, idemgrpc.ReasonRequestTooLarge)
	if n := svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times for an oversized request", n)
	}
	wantCode(t, pay(t, c, "k-big", "small"), codes.OK, "") // nothing was claimed
}

// A response over the cap reaches its caller; copies are refused rather
// than run again.
func TestOversizedResponseIsNotReplayed(t *testing.T) {
	svc := &paySvc{}
	c := dial(t, serve(t, svc, memstore.New(), idemgrpc.WithMaxResponseSize(512)))
	first := pay(t, c, "k-1", strings.Repeat("x", 4096))
	wantCode(t, first, codes.OK, "")
	if len(first.resp.GetPayload().GetBody()) != 4096 {
		t.Fatalf("the first caller got %d bytes, want its whole answer", len(first.resp.GetPayload().GetBody()))
	}
	again := pay(t, c, "k-1", strings.Repeat("x", 4096))
	wantCode(t, again, codes.Internal, idemgrpc.ReasonNotRetained)
	if !again.replayed() || svc.calls.Load() != 1 {
		t.Fatalf("replayed %v, %d runs; want a replayed refusal and 1 run", again.replayed(), svc.calls.Load())
	}
}

// Transient codes are not recorded: the retry runs the handler again.
// Final failures are, and are replayed with their details.
func TestStatusRecording(t *testing.T) {
	cases := []struct {
		code   codes.Code
		record bool
	}{
		{codes.Unavailable, false}, {codes.ResourceExhausted, false}, {codes.DeadlineExceeded, false},
		{codes.Canceled, false}, {codes.Aborted, false}, {codes.Unauthenticated, false},
		{codes.Internal, false}, {codes.Unknown, false},
		{codes.InvalidArgument, true}, {codes.FailedPrecondition, true}, {codes.NotFound, true},
		{codes.PermissionDenied, true}, {codes.AlreadyExists, true},
	}
	for _, tc := range cases {
		t.Run(tc.code.String(), func(t *testing.T) {
			svc := &paySvc{}
			svc.answer = func(_ context.Context, _ *grpc_testing.SimpleRequest, n int32) (*grpc_testing.SimpleResponse, error) {
				if n > 1 {
					return &grpc_testing.SimpleResponse{Username: "charged"}, nil
				}
				st, _ := status.New(tc.code, "card declined").WithDetails(&errdetails.ErrorInfo{Reason: "DECLINED", Domain: "psp"})
				return nil, st.Err()
			}
			c := dial(t, serve(t, svc, memstore.New()))
			wantCode(t, pay(t, c, "k", "1"), tc.code, "")
			again := pay(t, c, "k", "1")
			if !tc.record {
				wantCode(t, again, codes.OK, "")
				if svc.calls.Load() != 2 || again.replayed() {
					t.Fatalf("%v was recorded: %d runs", tc.code, svc.calls.Load())
				}
				return
			}
			wantCode(t, again, tc.code, "")
			if !again.replayed() || svc.calls.Load() != 1 || again.st.Message() != "card declined" {
				t.Fatalf("%v not replayed: %v, %d runs", tc.code, again.st, svc.calls.Load())
			}
			if info, ok := again.st.Details()[0].(*errdetails.ErrorInfo); !ok || info.GetReason() != "DECLINED" {
				t.Fatalf("replayed details %v, want the handler's", again.st.Details())
			}
		})
	}
}

func TestRecordCodeOption(t *testing.T) {
	svc := &paySvc{}
	svc.answer = func(context.Context, *grpc_testing.SimpleRequest, int32) (*grpc_testing.SimpleResponse, error) {
		return nil, status.Error(codes.Internal, "ledger written, receipt failed")
	}
	all := func(codes.Code) bool { return true }
	c := dial(t, serve(t, svc, memstore.New(), idemgrpc.WithRecordCode(all)))
	wantCode(t, pay(t, c, "k", "1"), codes.Internal, "")
	wantCode(t, pay(t, c, "k", "1"), codes.Internal, "")
	if svc.calls.Load() != 1 {
		t.Fatalf("Internal recorded by option, yet the handler ran %d times", svc.calls.Load())
	}
	svc.answer = func(context.Context, *grpc_testing.SimpleRequest, int32) (*grpc_testing.SimpleResponse, error) {
		return nil, status.Error(codes.Unavailable, "psp down")
	}
	wantCode(t, pay(t, c, "k2", "1"), codes.Unavailable, "")
	wantCode(t, pay(t, c, "k2", "1"), codes.Unavailable, "")
	if svc.calls.Load() != 3 {
		t.Fatalf("Unavailable must never be recorded, whatever the option says; runs %d, want 3", svc.calls.Load())
	}
}

// A handler that panics is answered Internal, the server lives on, and the
// claim is released so the retry runs.
func TestPanickingHandler(t *testing.T) {
	svc := &paySvc{}
	svc.answer = func(_ context.Context, _ *grpc_testing.SimpleRequest, n int32) (*grpc_testing.SimpleResponse, error) {
		if n == 1 {
			panic("nil map in the fee table")
		}
		return &grpc_testing.SimpleResponse{Username: "charged"}, nil
	}
	c := dial(t, serve(t, svc, memstore.New()))
	wantCode(t, pay(t, c, "k", "1"), codes.Internal, idemgrpc.ReasonPanicked)
	again := pay(t, c, "k", "1")
	wantCode(t, again, codes.OK, "")
	if again.replayed() || again.resp.GetUsername() != "charged" || svc.calls.Load() != 2 {
		t.Fatalf("after a panic the retry got %v (replayed %v), %d runs", again.resp, again.replayed(), svc.calls.Load())
	}
}

// A copy that arrives while the first call runs gets Aborted with
// RetryInfo; with WithWait it waits and gets the replay.
func TestConcurrentCopy(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(map[bool]string{false: "refused", true: "waits"}[wait], func(t *testing.T) {
			svc := &paySvc{gate: make(chan struct{})}
			var opts []idemgrpc.Option
			if wait {
				opts = append(opts, idemgrpc.WithWait(20*time.Second))
			}
			c := dial(t, serve(t, svc, memstore.New(), opts...))
			var first call
			var wg sync.WaitGroup
			wg.Go(func() { first = pay(t, c, "k", "1") })
			waitFor(t, func() bool { return svc.calls.Load() == 1 })
			if !wait {
				copyCall := pay(t, c, "k", "1")
				close(svc.gate)
				wg.Wait()
				wantCode(t, copyCall, codes.Aborted, idemgrpc.ReasonInProgress)
				if d, err := retryInfo(copyCall.st); err != nil || d <= 0 {
					t.Fatalf("RetryInfo %v, %v; want a positive delay", d, err)
				}
				return
			}
			var copyCall call
			wg.Go(func() { copyCall = pay(t, c, "k", "1") })
			close(svc.gate)
			wg.Wait()
			wantCode(t, copyCall, codes.OK, "")
			if !proto.Equal(copyCall.resp, first.resp) || svc.calls.Load() != 1 {
				t.Fatalf("waiting copy got %v, first %v, %d runs", copyCall.resp, first.resp, svc.calls.Load())
			}
		})
	}
}

func TestStreamingMethodIsRefused(t *testing.T) {
	svc := &paySvc{}
	stream := grpc_testing.TestService_StreamingOutputCall_FullMethodName
	c := dial(t, serve(t, svc, memstore.New(), idemgrpc.WithMethods(unaryCall, stream)))
	s, err := c.StreamingOutputCall(context.Background(), &grpc_testing.StreamingOutputCallRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	st := status.Convert(err)
	if st.Code() != codes.Unimplemented || reasonOf(st) != idemgrpc.ReasonStreaming || !strings.Contains(st.Message(), "streaming") {
		t.Fatalf("guarded stream answered %v, want Unimplemented %s", st, idemgrpc.ReasonStreaming)
	}
	// A stream that is not guarded passes through to the service (which
	// does not implement it).
	s, err = c.FullDuplexCall(context.Background())
	if err == nil {
		_, err = s.Recv()
	}
	if st := status.Convert(err); reasonOf(st) != "" {
		t.Fatalf("an unguarded stream was refused by the guard: %v", st)
	}
}

func TestStoreUnavailable(t *testing.T) {
	svc := &paySvc{}
	down := flakystore.New(memstore.New(), errors.New("connection refused"))
	down.ClaimFails.Store(math.MaxInt32)
	c := dial(t, serve(t, svc, down))
	got := pay(t, c, "k", "1")
	wantCode(t, got, codes.Unavailable, idemgrpc.ReasonStoreUnavailable)
	if _, err := retryInfo(got.st); err != nil || svc.calls.Load() != 0 {
		t.Fatalf("store down: %v, %d runs", err, svc.calls.Load())
	}
}

func TestMisconfiguration(t *testing.T) {
	for name, opts := range map[string][]idemgrpc.Option{
		"no methods":       nil,
		"bad method name":  {idemgrpc.WithMethods("Charge")},
		"binary md key":    {idemgrpc.WithMethods(unaryCall), idemgrpc.WithMetadataKey("key-bin")},
		"reserved md key":  {idemgrpc.WithMethods(unaryCall), idemgrpc.WithMetadataKey("grpc-key")},
		"nil principal":    {idemgrpc.WithMethods(unaryCall), idemgrpc.WithPrincipal(nil)},
		"zero in-progress": {idemgrpc.WithMethods(unaryCall), idemgrpc.WithInProgress(0)},
		"negative cap":     {idemgrpc.WithMethods(unaryCall), idemgrpc.WithMaxRequestSize(-1)},
	} {
		if _, err := idemgrpc.NewUnaryServerInterceptor(memstore.New(), opts...); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("%s: %v, want idem.ErrInvalid", name, err)
		}
	}
	if _, err := idemgrpc.NewUnaryServerInterceptor(nil, idemgrpc.WithMethods(unaryCall)); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("nil store: %v", err)
	}
}

func TestStoreKeyFindsTheRecord(t *testing.T) {
	store := memstore.New()
	c := dial(t, serve(t, &paySvc{}, store))
	wantCode(t, pay(t, c, "k-42", "1", "authorization", "Bearer alice"), codes.OK, "")
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer alice"))
	key, err := idemgrpc.StoreKey(idemgrpc.AuthorizationPrincipal(ctx), unaryCall, "k-42")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Lookup(context.Background(), key)
	if err != nil || rec.State != idem.Done {
		t.Fatalf("Lookup(StoreKey) = %+v, %v; want the done record", rec, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition never became true")
}
