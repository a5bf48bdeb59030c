package idemgrpc_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
)

// realStores are the backends the storm runs on; each opens a fresh,
// test-private namespace and removes it at the end.
var realStores = teststores.Stores("idemgrpc", "memory", "redis", "postgres", "mysql", "layered")

// A storm: 8 clients, each on its own connection, send the same payment 4
// times at once while the first run is held open. The handler runs exactly
// once and every caller gets its response.
func TestStormRunsTheHandlerOnce(t *testing.T) {
	for _, st := range realStores {
		t.Run(st.Name, func(t *testing.T) {
			svc := &paySvc{gate: make(chan struct{})}
			addr := serve(t, svc, st.Open(t), idemgrpc.WithWait(30*time.Second))
			const clients, copies = 8, 4
			calls := make([]call, clients*copies)
			var wg sync.WaitGroup
			for i := range clients {
				c := dial(t, addr)
				for j := range copies {
					wg.Go(func() { calls[i*copies+j] = pay(t, c, "storm-1", "100 EUR") })
				}
			}
			waitFor(t, func() bool { return svc.calls.Load() >= 1 })
			time.Sleep(100 * time.Millisecond) // let the copies reach the claim
			close(svc.gate)
			wg.Wait()
			checkStorm(t, calls)
			if n := svc.calls.Load(); n != 1 {
				t.Fatalf("handler ran %d times in the storm, want exactly 1", n)
			}
		})
	}
}

func checkStorm(t *testing.T, calls []call) {
	t.Helper()
	replays := 0
	for i, c := range calls {
		if c.st.Code() != codes.OK {
			t.Fatalf("call %d: %v", i, c.st)
		}
		if !proto.Equal(c.resp, calls[0].resp) {
			t.Fatalf("call %d got %v, call 0 %v", i, c.resp, calls[0].resp)
		}
		if c.replayed() {
			replays++
		}
	}
	if replays != len(calls)-1 {
		t.Fatalf("%d of %d calls were replays, want %d", replays, len(calls), len(calls)-1)
	}
}
