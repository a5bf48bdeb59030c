package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

const (
	envDriver = "IDEM_SQLSTORE_DRIVER"
	envDSN    = "IDEM_SQLSTORE_DSN"
	envTable  = "IDEM_SQLSTORE_TABLE"
)

func TestMain(m *testing.M) {
	idemtest.CrashChild(func() (idem.Store, error) {
		t := os.Getenv(envTable)
		if os.Getenv(envDriver) == pgxPool {
			pool, err := pgxpool.New(context.Background(), os.Getenv(envDSN))
			if err != nil {
				return nil, err
			}
			return sqlstore.NewPgx(pool, sqlstore.WithTable(t), sqlstore.WithTokenTable(t+"_tok"))
		}
		db, err := sql.Open(os.Getenv(envDriver), os.Getenv(envDSN))
		if err != nil {
			return nil, err
		}
		return sqlstore.New(db, sqlstore.WithTable(t), sqlstore.WithTokenTable(t+"_tok"))
	})
	os.Exit(m.Run())
}

// backend is one database the tests run on.
type backend struct {
	name   string
	driver string                    // database/sql's, for the tests' own statements
	open   func(t *testing.T) string // returns a DSN
	pgx    bool                      // the store runs on a pgx pool, not database/sql
}

// pgxPool names the pgx pool as the crash child's driver.
const pgxPool = "pgxpool"

var backends = []backend{
	{"postgres", "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }, false},
	{"pgx", "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }, true},
	// Both affected-row conventions a MySQL user may have set.
	{"mysql", "mysql", func(t *testing.T) string { return testsvc.MySQL(t) }, false},
	{"mysql-found-rows", "mysql", func(t *testing.T) string { return testsvc.MySQL(t, "clientFoundRows", "true") }, false},
	{"sqlite", "sqlite", func(t *testing.T) string {
		return "file:" + filepath.Join(t.TempDir(), "idem.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}, false},
}

// eachBackend runs test on every backend, in parallel subtests.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

// testStore is a store in tables of its own test, dropped when the test
// ends.
type testStore struct {
	*sqlstore.Store
	db    *sql.DB  // the database, through database/sql
	table string   // the records' table; the tokens' is table_tok
	env   []string // the environment that opens the store in a crash child
}

// newStore opens b's database and a store on it in tables unique to the
// test, migrated, and drops them when the test ends.
func newStore(t *testing.T, b backend) testStore {
	t.Helper()
	dsn := b.open(t)
	db := openDB(t, b.driver, dsn)
	table := "idemtest_" + idem.NewToken()[:12]
	opts := []sqlstore.Option{sqlstore.WithTable(table), sqlstore.WithTokenTable(table + "_tok")}
	var s *sqlstore.Store
	var err error
	driver := b.driver
	if b.pgx {
		pool, perr := pgxpool.New(context.Background(), dsn)
		if perr != nil {
			t.Fatal(perr)
		}
		t.Cleanup(pool.Close)
		s, err = sqlstore.NewPgx(pool, opts...)
		driver = pgxPool
	} else {
		s, err = sqlstore.New(db, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{table, table + "_tok"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return testStore{s, db, table, []string{envDriver + "=" + driver, envDSN + "=" + dsn, envTable + "=" + table}}
}

// openDB opens dsn with database/sql's driver and closes it when the test
// ends. Its pool is capped, as a service's would be: the conformance suite
// runs fifty claims at once, and the shared PostgreSQL, which other
// packages' tests use at the same time, allows a hundred connections.
func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b).Store
		idemtest.Run(t, func(*testing.T) idem.Store { return s })
	})
}

func TestTokens(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b).Store
		idemtest.RunTokens(t, func(*testing.T) idem.TokenStore { return s })
	})
}

func TestCrashedHandlerTakenOverAfterDeadline(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		idemtest.Crash(t, s.Store, s.env...)
	})
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := s.Migrate(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	})
}

// The primary key is the unique index: a second row for one key cannot be
// written, whatever the store's code does.
func TestUniqueIndexOnKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		insert := fmt.Sprintf(`INSERT INTO %s (idem_key, state, token, fingerprint, expires_ms, created_ms) VALUES ('k', 1, 't', '', 0, 0)`, s.table)
		if _, err := s.db.Exec(insert); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(insert); err == nil {
			t.Fatal("a second row with the same key was accepted")
		}
	})
}

func TestPurge(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		ctx := context.Background()
		c, err := s.Claim(ctx, "gone", "", time.Millisecond)
		if err != nil || c.State != idem.Claimed {
			t.Fatal(c, err)
		}
		if _, err := s.Claim(ctx, "kept", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.PutToken(ctx, idem.NewToken(), "", time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		n, err := s.Purge(ctx)
		if err != nil || n != 2 {
			t.Fatalf("Purge = %d, %v; want 2 expired rows", n, err)
		}
		if c, _ := s.Claim(ctx, "kept", "", time.Hour); c.State != idem.InProgress {
			t.Fatalf("live claim purged: %v", c.State)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite", filepath.Join(t.TempDir(), "x.db"))
	for _, name := range []string{"", "1abc", "a-b", "a.b", "t; DROP TABLE users", `"quoted"`, "a b", "ünï"} {
		if _, err := sqlstore.New(db, sqlstore.WithTable(name)); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("WithTable(%q) = %v, want ErrInvalid", name, err)
		}
	}
	// <table>_expires names the table's index, and must fit 63 bytes too.
	if _, err := sqlstore.New(db, sqlstore.WithTable(strings.Repeat("t", 56))); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("a 56-byte table = %v, want ErrInvalid", err)
	}
	if _, err := sqlstore.New(db, sqlstore.WithTokenTable(strings.Repeat("t", 56))); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("a 56-byte token table = %v, want ErrInvalid", err)
	}
	if _, err := sqlstore.New(db, sqlstore.WithTable(strings.Repeat("t", 55))); err != nil {
		t.Errorf("a 55-byte table: %v", err)
	}
	if _, err := sqlstore.New(db, sqlstore.WithTable("same"), sqlstore.WithTokenTable("same")); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("one table for both = %v, want ErrInvalid", err)
	}
	if _, err := sqlstore.New(nil); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("nil db = %v", err)
	}
	s, err := sqlstore.New(db)
	if err != nil || s.Dialect() != sqlstore.SQLite {
		t.Fatalf("detect sqlite = %v, %v", s, err)
	}
	if s, err := sqlstore.New(openDB(t, "pgx", "postgres://127.0.0.1:1/none")); err != nil || s.Dialect() != sqlstore.Postgres {
		t.Fatalf("detect postgres = %v, %v", s, err)
	}
	if s, err := sqlstore.New(openDB(t, "mysql", "root@tcp(127.0.0.1:1)/none")); err != nil || s.Dialect() != sqlstore.MySQL {
		t.Fatalf("detect mysql = %v, %v", s, err)
	}
}

func TestNewPgxRejectsBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := sqlstore.NewPgx(nil); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("nil pool = %v, want ErrInvalid", err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := sqlstore.NewPgx(pool, sqlstore.WithDialect(sqlstore.MySQL)); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("pgx on MySQL = %v, want ErrInvalid", err)
	}
	if _, err := sqlstore.NewPgx(pool, sqlstore.WithTable("a-b")); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("bad table = %v, want ErrInvalid", err)
	}
	if s, err := sqlstore.NewPgx(pool); err != nil || s.Dialect() != sqlstore.Postgres {
		t.Errorf("NewPgx = %v, %v; want a PostgreSQL store", s, err)
	}
}
