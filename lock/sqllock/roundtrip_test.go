package sqllock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// A counted is a Locker whose round trips to its server are counted.
type counted struct {
	name string
	// server returns a function opening Lockers on one database, each
	// with its own counter.
	server func(t *testing.T) func(table string) (*sqllock.Locker, *sqlcount.Counter)
	// perStatement is the round trips of one statement: 2 for MySQL
	// statements sent unprepared without interpolateParams=true (the
	// driver prepares, then executes); 1 once the Locker prepares them.
	perStatement int64
	// refusedStatements is the statements of an attempt on a held key:
	// PostgreSQL's and MySQL's acquire also tell the holder's time left;
	// SQLite's read refuses it alone.
	refusedStatements int64
	// acquireStatements is the statements of an acquisition of a free key:
	// SQLite reads before it writes, so that a refusal takes no write lock.
	acquireStatements int64
}

func countedDB(driver string, dsn func(t *testing.T) string, d sqllock.Dialect, opts ...sqllock.Option) func(t *testing.T) func(table string) (*sqllock.Locker, *sqlcount.Counter) {
	return func(t *testing.T) func(table string) (*sqllock.Locker, *sqlcount.Counter) {
		dsn := dsn(t)
		return func(table string) (*sqllock.Locker, *sqlcount.Counter) {
			c := new(sqlcount.Counter)
			db, err := sqlcount.Open(driver, dsn, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if d == sqllock.SQLite {
				db.SetMaxOpenConns(1)
			}
			l, err := sqllock.New(t.Context(), db, d, append(opts, sqllock.WithTable(table))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l, c
		}
	}
}

func countedBackends(t *testing.T) []counted {
	sqlite := filepath.Join(t.TempDir(), "roundtrips.db")
	return []counted{
		{"sqlite", countedDB("sqlite", func(*testing.T) string { return sqliteDSN(sqlite) }, sqllock.SQLite), 1, 1, 2},
		{"postgres", countedDB("pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }, sqllock.Postgres), 1, 1, 1},
		{"pgx", func(t *testing.T) func(table string) (*sqllock.Locker, *sqlcount.Counter) {
			return func(table string) (*sqllock.Locker, *sqlcount.Counter) {
				c := new(sqlcount.Counter)
				cfg, err := pgxpool.ParseConfig(testsvc.PostgresURL(t))
				if err != nil {
					t.Fatal(err)
				}
				cfg.ConnConfig.Tracer = c.Tracer()
				// One connection, so pgx prepares each statement once: the
				// count after the first use is the steady state's.
				cfg.MaxConns = 1
				pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				l, err := sqllock.NewPgx(t.Context(), pool, sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				return l, c
			}
		}, 1, 1, 1},
		{"mysql", countedDB("mysql", func(t *testing.T) string { return testsvc.MySQL(t, "interpolateParams", "true") }, sqllock.MySQL), 1, 1, 1},
		{"mysql-prepared", countedDB("mysql", func(t *testing.T) string { return testsvc.MySQL(t) }, sqllock.MySQL), 1, 1, 1},
		{"mysql-unprepared", countedDB("mysql", func(t *testing.T) string { return testsvc.MySQL(t) }, sqllock.MySQL, sqllock.WithUnpreparedStatements()), 2, 1, 1},
	}
}

func uniqueLockTable(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "rt_" + hex.EncodeToString(b[:])
}

// TestRoundTrips counts the round trips of each operation on each server,
// counted on the client: one statement for an acquire, a renewal, a release;
// an attempt on a held key is one statement on PostgreSQL and two elsewhere
// (the second reads the holder's time left). Each operation runs twice and
// the second is counted, so that pgx's preparation of a new statement on
// its connection is not.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range countedBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			open, table := b.server(t), uniqueLockTable(t)
			l, c := open(table)
			other, oc := open(table)
			count := func(what string, want int64, op func() error) {
				t.Helper()
				for i := range 2 {
					before := c.Load() + oc.Load()
					if err := op(); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if got := c.Load() + oc.Load() - before; i == 1 && got != want {
						t.Errorf("%s: %d round trips, want %d", what, got, want)
					}
				}
			}
			var leases []*lock.Lease
			count("acquire", b.acquireStatements*b.perStatement, func() error {
				lease, err := l.Acquire(ctx, fmt.Sprintf("k%d", len(leases)), lock.WithFixedTTL(), lock.WithTTL(time.Minute))
				leases = append(leases, lease)
				return err
			})
			count("renew", b.perStatement, func() error { return leases[0].Extend(ctx, time.Minute) })
			count("refused acquire", b.refusedStatements*b.perStatement, func() error {
				_, err := other.Acquire(ctx, "k0", lock.WithWait(0))
				if !errors.Is(err, lock.ErrNotAcquired) {
					return fmt.Errorf("acquire of a held key = %v, want ErrNotAcquired", err)
				}
				return nil
			})
			count("release", b.perStatement, func() error {
				err := leases[len(leases)-1].Release(ctx)
				leases = leases[:len(leases)-1]
				return err
			})
		})
	}
}

// TestBatchRenewalRoundTrips holds many renewed leases until each has been
// renewed at least once, and counts the round trips meanwhile: a batch is
// one statement for all of them (on MySQL a SELECT follows only when a lease
// was lost), so renewing them one by one, at least one round trip per lease,
// fails it.
func TestBatchRenewalRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range countedBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l, c := b.server(t)(uniqueLockTable(t))
			const n = 100
			leases := make([]*lock.Lease, n)
			first := make([]time.Time, n)
			for i := range leases {
				var err error
				if leases[i], err = l.Acquire(ctx, fmt.Sprintf("batch:%d", i), lock.WithTTL(3*time.Second)); err != nil {
					t.Fatal(err)
				}
				first[i] = leases[i].Deadline()
			}
			before := c.Load()
			for i, lease := range leases {
				waitRenewed(ctx, t, i, lease, first[i])
			}
			if got := c.Load() - before; got >= n/4 {
				t.Errorf("renewing %d leases once took %d round trips; a batch takes one per tick", n, got)
			}
			for _, lease := range leases {
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// waitRenewed returns once lease i's deadline is past first, its deadline
// when it was taken: it has been renewed. It fails t if the lease is lost
// or ctx ends first.
func waitRenewed(ctx context.Context, t *testing.T, i int, lease *lock.Lease, first time.Time) {
	t.Helper()
	for !lease.Deadline().After(first) {
		if err := lease.Err(); err != nil {
			t.Fatalf("lease %d lost: %v", i, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
