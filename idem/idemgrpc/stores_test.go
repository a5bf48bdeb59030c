package idemgrpc_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/redisstore"
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
	c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	prefix := testsvc.KeyPrefix(t)
	t.Cleanup(func() { cleanRedis(c, prefix) })
	return redisstore.New(c, redisstore.WithPrefix(prefix))
}

func cleanRedis(c *redis.Client, prefix string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	_ = c.Close()
}

func openSQL(t *testing.T, driver, dsn string) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	table := "idemgrpc_" + idem.NewToken()[:12]
	s, err := sqlstore.New(db, sqlstore.WithTable(table), sqlstore.WithTokenTable(table+"_tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_tok")
		_ = db.Close()
	})
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
