package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestRoundTrips counts, on the client, the round trips of each step of the
// cycle: a first claim, a record, a release and a replay are one statement
// each on PostgreSQL (its claim reads the row that stopped it); a replay is
// two on SQLite and MySQL (the claim, then the SELECT of the record).
// MySQL without interpolateParams=true prepares each statement first: two
// round trips a statement. Each step runs twice and the second is counted,
// so that pgx's preparation of a new statement is not.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	sqlite := filepath.Join(t.TempDir(), "roundtrips.db")
	for _, b := range []struct {
		name         string
		open         openCounted
		perStatement int64
		replay       int64 // statements
	}{
		{"sqlite", openCountedDB("sqlite", func(*testing.T) string {
			return "file:" + sqlite + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		}), 1, 2},
		{"postgres", openCountedDB("pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }), 1, 1},
		{"pgx", openCountedPgx, 1, 1},
		{"mysql", openCountedDB("mysql", func(t *testing.T) string { return testsvc.MySQL(t, "interpolateParams", "true") }), 1, 2},
		{"mysql-prepared", openCountedDB("mysql", func(t *testing.T) string { return testsvc.MySQL(t) }), 2, 2},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			table := "idemrt_" + idem.NewToken()[:12]
			rt := roundTrips{t: t, c: new(sqlcount.Counter)}
			s := b.open(t, rt.c, []sqlstore.Option{sqlstore.WithTable(table), sqlstore.WithTokenTable(table + "_tok")})
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			tokens := map[string]string{}
			key := func(i int) string { return fmt.Sprintf("k%d", i) }
			rt.count("first claim", b.perStatement, func(i int) error {
				cl, err := s.Claim(ctx, key(i), "fp", time.Minute)
				if err == nil && cl.State != idem.Claimed {
					err = fmt.Errorf("state %v, want claimed", cl.State)
				}
				tokens[key(i)] = cl.Token
				return err
			})
			rt.count("record", b.perStatement, func(i int) error {
				return s.Record(ctx, key(i), tokens[key(i)], []byte("answer"), time.Minute)
			})
			rt.count("replay", b.replay*b.perStatement, func(i int) error {
				cl, err := s.Claim(ctx, key(i), "fp", time.Minute)
				if err == nil && (cl.State != idem.Done || string(cl.Result) != "answer") {
					err = fmt.Errorf("claim of a recorded key = %+v, want its record", cl)
				}
				return err
			})
			for i := range 2 {
				cl, err := s.Claim(ctx, fmt.Sprintf("r%d", i), "fp", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				tokens[fmt.Sprintf("r%d", i)] = cl.Token
			}
			rt.count("release", b.perStatement, func(i int) error {
				return s.Release(ctx, fmt.Sprintf("r%d", i), tokens[fmt.Sprintf("r%d", i)])
			})
		})
	}
}

// roundTrips counts the round trips of a store's steps.
type roundTrips struct {
	t *testing.T
	c *sqlcount.Counter
}

// count runs op twice and checks that its second run took want round
// trips.
func (rt roundTrips) count(what string, want int64, op func(i int) error) {
	rt.t.Helper()
	for i := range 2 {
		before := rt.c.Load()
		if err := op(i); err != nil {
			rt.t.Fatalf("%s: %v", what, err)
		}
		if got := rt.c.Load() - before; i == 1 && got != want {
			rt.t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
}

// openCounted opens a store whose round trips c counts.
type openCounted func(t *testing.T, c *sqlcount.Counter, opts []sqlstore.Option) *sqlstore.Store

// openCountedDB opens a store on database/sql's driver and the database
// dsn names.
func openCountedDB(driver string, dsn func(t *testing.T) string) openCounted {
	return func(t *testing.T, c *sqlcount.Counter, opts []sqlstore.Option) *sqlstore.Store {
		db, err := sqlcount.Open(driver, dsn(t), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := sqlstore.New(db, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// openCountedPgx opens a store on a pgx pool of one connection to
// PostgreSQL, so that each statement is prepared once.
func openCountedPgx(t *testing.T, c *sqlcount.Counter, opts []sqlstore.Option) *sqlstore.Store {
	cfg, err := pgxpool.ParseConfig(testsvc.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = c.Tracer()
	cfg.MaxConns = 1 // each statement prepared once
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := sqlstore.NewPgx(pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
