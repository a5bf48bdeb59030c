package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/interop/grpc_testing"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The environment of a crash test's server process.
const (
	envCrashRedis   = "IDEMGRPC_CRASH_REDIS"  // the Redis address; set only in the child
	envCrashPrefix  = "IDEMGRPC_CRASH_PREFIX" // its key prefix
	envCrashBlock   = "IDEMGRPC_CRASH_BLOCK"  // "1": the handler never returns
	crashInProgress = 1500 * time.Millisecond
)

// crashChild serves UnaryCall on a loopback port, guarded by a Redis store,
// when the test binary is re-executed as a crash test's server. It prints
// "addr ADDR", then "running N" each time the handler starts (N counts runs
// across every server process), and never returns.
func crashChild() {
	addr := os.Getenv(envCrashRedis)
	if addr == "" {
		return
	}
	prefix := os.Getenv(envCrashPrefix)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	store := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	svc := &paySvc{answer: func(ctx context.Context, _ *grpc_testing.SimpleRequest, _ int32) (*grpc_testing.SimpleResponse, error) {
		n, err := rdb.Incr(ctx, prefix+"runs").Result()
		if err != nil {
			return nil, err
		}
		fmt.Printf("running %d\n", n)
		if os.Getenv(envCrashBlock) == "1" {
			select {} // mid-payment when the process is killed
		}
		return &grpc_testing.SimpleResponse{Username: fmt.Sprintf("charge-%d", n)}, nil
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(idemgrpc.UnaryServerInterceptor(store,
		idemgrpc.WithMethods(unaryCall), idemgrpc.WithInProgress(crashInProgress))))
	grpc_testing.RegisterTestServiceServer(srv, svc)
	fmt.Printf("addr %s\n", lis.Addr())
	_ = srv.Serve(lis)
	os.Exit(3)
}

// startServerProcess starts a crash test's server, a child process, and
// returns it with its address.
func startServerProcess(t *testing.T, redisAddr, prefix string, block bool) (*suitekit.Child, string) {
	t.Helper()
	p := suitekit.StartChild(t, envCrashRedis+"="+redisAddr, envCrashPrefix+"="+prefix,
		envCrashBlock+"="+map[bool]string{true: "1", false: "0"}[block])
	return p, expect(t, p, "addr ")
}

// expect waits for the next line of the server's output, which must start
// with prefix, and returns the rest.
func expect(t *testing.T, p *suitekit.Child, prefix string) string {
	t.Helper()
	return p.Expect(t, prefix, 20*time.Second, func(l string) {
		if !strings.HasPrefix(l, prefix) {
			t.Fatalf("server process said %q, want %q...", l, prefix)
		}
	})
}

// The server process dies mid-payment; a new process with the same store
// refuses the retries while the dead claim lasts, then runs the handler
// exactly once and replays its answer to every other retry.
func TestCrashedServerIsTakenOverOnce(t *testing.T) {
	rdb, prefix := testsvc.RedisClient(t)
	redisAddr := rdb.Options().Addr

	first, addr := startServerProcess(t, redisAddr, prefix, true)
	lost := make(chan call, 1)
	firstClient := dial(t, addr)
	go func() { lost <- pay(t, firstClient, "crash-1", "100 EUR") }()
	expect(t, first, "running 1")
	_ = first.Cmd.Process.Kill()
	_ = first.Wait()
	if got := <-lost; got.st.Code() != codes.Unavailable {
		t.Fatalf("the call to the killed server answered %v, want Unavailable", got.st)
	}

	_, addr = startServerProcess(t, redisAddr, prefix, false)
	var refused atomic.Int32
	calls := make([]call, 4)
	var wg sync.WaitGroup
	for i := range calls {
		c := dial(t, addr)
		wg.Go(func() {
			for {
				calls[i] = pay(t, c, "crash-1", "100 EUR")
				if calls[i].st.Code() != codes.Aborted {
					return
				}
				refused.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for i, c := range calls {
		if c.st.Code() != codes.OK || c.resp.GetUsername() != "charge-2" {
			t.Fatalf("retry %d: %v %v, want charge-2", i, c.st, c.resp)
		}
	}
	runs, err := rdb.Get(context.Background(), prefix+"runs").Int()
	if err != nil || runs != 2 {
		t.Fatalf("handler runs across both processes: %d (%v), want 2: the killed one and one takeover", runs, err)
	}
	if refused.Load() == 0 {
		t.Fatal("no retry saw the dead claim in progress; the test proved nothing")
	}
}
