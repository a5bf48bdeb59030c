package layered_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/internal/flakystore"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

const (
	envRedis  = "IDEM_LAYERED_REDIS"
	envPrefix = "IDEM_LAYERED_PREFIX"
	envPG     = "IDEM_LAYERED_PG"
	envTable  = "IDEM_LAYERED_TABLE"
)

func TestMain(m *testing.M) {
	idemtest.CrashChild(func() (idem.Store, error) {
		front := redisstore.New(redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)}), redisstore.WithPrefix(os.Getenv(envPrefix)))
		db, err := sql.Open("pgx", os.Getenv(envPG))
		if err != nil {
			return nil, err
		}
		tb := os.Getenv(envTable)
		back, err := sqlstore.New(db, sqlstore.WithTable(tb), sqlstore.WithTokenTable(tb+"_tok"))
		if err != nil {
			return nil, err
		}
		return layered.New(front, back), nil
	})
	os.Exit(m.Run())
}

// redisFront returns a redisstore on addr under a test-private prefix.
func redisFront(t *testing.T, addr string) (*redisstore.Store, *redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	prefix := testsvc.KeyPrefix(t)
	t.Cleanup(func() { testsvc.DeleteKeys(c, prefix); _ = c.Close() })
	return redisstore.New(c, redisstore.WithPrefix(prefix)), c, prefix
}

// pgBack returns a sqlstore on the shared PostgreSQL with test-private tables.
func pgBack(t *testing.T) (*sqlstore.Store, string, string) {
	t.Helper()
	url := testsvc.PostgresURL(t)
	s, table := teststores.SQL(t, "pgx", url, "layered")
	return s, url, table
}

func TestConformance(t *testing.T) {
	t.Parallel()
	front, _, _ := redisFront(t, testsvc.RedisAddr(t))
	back, _, _ := pgBack(t)
	idemtest.Run(t, func(*testing.T) idem.Store { return layered.New(front, back) })
}

func TestCrashedHandlerTakenOverAfterDeadline(t *testing.T) {
	t.Parallel()
	addr := testsvc.RedisAddr(t)
	front, _, prefix := redisFront(t, addr)
	back, url, table := pgBack(t)
	idemtest.Crash(t, layered.New(front, back),
		envRedis+"="+addr, envPrefix+"="+prefix, envPG+"="+url, envTable+"="+table)
}

// Redis flushed between two copies of a payment: the second copy is replayed
// from the database, not run.
func TestFlushAllBetweenCopies(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedis(t)
	front, c, _ := redisFront(t, rs.Addr())
	back, _, _ := pgBack(t)
	s := layered.New(front, back)
	ctx := context.Background()
	var charges atomic.Int32
	pay := func(context.Context) (int32, error) { return charges.Add(1), nil }

	if v, err := idem.Do(ctx, s, "order-1001", pay); err != nil || v != 1 {
		t.Fatalf("first copy = %d, %v", v, err)
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := idem.Do(ctx, s, "order-1001", pay); err != nil || v != 1 {
		t.Fatalf("copy after FLUSHALL = %d, %v; want the first charge replayed", v, err)
	}
	if charges.Load() != 1 {
		t.Fatalf("charged %d times, want 1", charges.Load())
	}
	// The outcome was copied back to the front: the next copy needs only it.
	counted := flakystore.New(back, nil) // counts the claims that reach the back
	s2 := layered.New(front, counted)
	if v, err := idem.Do(ctx, s2, "order-1001", pay); err != nil || v != 1 || counted.Claims.Load() != 0 {
		t.Fatalf("third copy = %d, %v with %d back claims; want a front-only replay", v, err, counted.Claims.Load())
	}
}

// Redis flushed while the first copy is still running: a second copy is
// refused as in progress by the database, and the first copy's outcome is
// then replayed.
func TestFlushAllMidFlight(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedis(t)
	front, c, _ := redisFront(t, rs.Addr())
	back, _, _ := pgBack(t)
	s := layered.New(front, back)
	ctx := context.Background()
	var charges atomic.Int32
	finish := runHeld(t, s, "order-1002", &charges)
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := idem.Do(ctx, s, "order-1002", func(context.Context) (int32, error) { return charges.Add(1), nil })
	if !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("copy during the first run after FLUSHALL = %v, want ErrInProgress", err)
	}
	finish()
	v, err := idem.Do(ctx, s, "order-1002", func(context.Context) (int32, error) { return charges.Add(1), nil })
	if err != nil || v != 1 || charges.Load() != 1 {
		t.Fatalf("copy after the run = %d, %v with %d charges; want the replay of 1", v, err, charges.Load())
	}
}

// runHeld starts a Do of key on s whose operation adds a charge, and
// returns once the operation runs. The operation returns when finish is
// called, which waits for the Do to end.
func runHeld(t *testing.T, s idem.Store, key string, charges *atomic.Int32) (finish func()) {
	running, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := idem.Do(context.Background(), s, key, func(context.Context) (int32, error) {
			close(running)
			<-release
			return charges.Add(1), nil
		}); err != nil {
			t.Error(err)
		}
	})
	<-running
	return func() { close(release); wg.Wait() }
}

// Redis down: the database alone still lets one copy through and replays it.
func TestFrontDownUsesBack(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedis(t)
	front, _, _ := redisFront(t, rs.Addr())
	back, _, _ := pgBack(t)
	var frontErrs atomic.Int32
	s := layered.New(front, back, layered.WithFrontErrors(func(error) { frontErrs.Add(1) }))
	rs.Stop()
	ctx := context.Background()
	var charges atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := idem.Do(ctx, s, "order-1003", func(context.Context) (int32, error) {
				time.Sleep(20 * time.Millisecond)
				return charges.Add(1), nil
			}, idem.WithWait(10*time.Second))
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if charges.Load() != 1 || frontErrs.Load() == 0 {
		t.Fatalf("charged %d times with %d front errors; want 1 charge through the back alone", charges.Load(), frontErrs.Load())
	}
}

func TestNilStoresPanicAtNew(t *testing.T) {
	t.Parallel()
	front, _, _ := redisFront(t, testsvc.RedisAddr(t))
	for _, tc := range []struct {
		name        string
		front, back idem.Store
		want        string
	}{
		{"front", nil, front, "nil front store"},
		{"back", front, nil, "nil back store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p, _ := recover().(string); !strings.Contains(p, tc.want) {
					t.Fatalf("New with a nil %s store panicked with %q, want %q", tc.name, p, tc.want)
				}
			}()
			layered.New(tc.front, tc.back)
		})
	}
	var zero layered.Store
	if _, err := zero.Claim(context.Background(), "k", "", time.Second); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("zero Store = %v, want ErrInvalid", err)
	}
}
