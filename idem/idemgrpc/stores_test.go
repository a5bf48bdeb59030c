package idemgrpc_test

import (
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// realStores are the backends the storm runs on; each opens a fresh,
// test-private namespace and removes it at the end.
var realStores = []struct {
	name string
	open func(t *testing.T) idem.Store
}{
	{"memory", func(*testing.T) idem.Store { return memstore.New() }},
	{"redis", openRedis},
	{"postgres", func(t *testing.T) idem.Store { return openSQL(t, "pgx", testsvc.PostgresURL(t)) }},
	{"mysql", func(t *testing.T) idem.Store {
		return openSQL(t, "mysql", testsvc.MySQL(t, "interpolateParams", "true"))
	}},
	{"layered", func(t *testing.T) idem.Store {
		return layered.New(openRedis(t), openSQL(t, "pgx", testsvc.PostgresURL(t)))
	}},
}

func openRedis(t *testing.T) idem.Store {
	s, _, _ := teststores.Redis(t)
	return s
}

func openSQL(t *testing.T, driver, dsn string) *sqlstore.Store {
	s, _ := teststores.SQL(t, driver, dsn, "idemgrpc")
	return s
}

// A storm: 8 clients, each on its own connection, send the same payment 4
// times at once while the first run is held open. The handler runs exactly
// once and every caller gets its response.
func TestStormRunsTheHandlerOnce(t *testing.T) {
	for _, st := range realStores {
		t.Run(st.name, func(t *testing.T) {
			svc := &paySvc{gate: make(chan struct{})}
			addr := serve(t, svc, st.open(t), idemgrpc.WithWait(30*time.Second))
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
