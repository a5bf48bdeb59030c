package sqllock_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// TestOneNameOneResourceSQLite: in one SQLite file (the database "latchkey
// run" uses by default), a lock, an election, a read-write lock and a
// semaphore of one name exclude each other; an acquisition in one mode while
// another holds the name is refused, naming that mode. Each handle is a
// database connection of its own, as another process's would be.
func TestOneNameOneResourceSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "modes.db")
	// The file, in WAL mode, with every mode's tables, before the parallel
	// subtests open it: a journal mode being set meanwhile is busy.
	if _, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite); err != nil {
		t.Fatal(err)
	}
	modetest.Run(t, modetest.Harness{
		Lock: func(t *testing.T) lock.Locker {
			l, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		RW: func(t *testing.T) *rwlock.Locker {
			l, err := sqllock.NewRW(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Semaphore: func(t *testing.T) *semaphore.Client {
			c, err := sqllock.NewSemaphores(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		Key: func(t *testing.T) string { return t.Name() },
	})
}

// TestOneNameOneResourcePostgres: the same on PostgreSQL, through pgx and
// through database/sql, where the modes meet on the name's row of the lock
// table.
func TestOneNameOneResourcePostgres(t *testing.T) {
	url := testsvc.PostgresURL(t)
	prefix := testsvc.KeyPrefix(t)
	for _, driver := range []string{"pgx", "database/sql"} {
		t.Run(driver, func(t *testing.T) {
			stdDB := func(t *testing.T) *sql.DB {
				return testsvc.OpenDB(t, "pgx", url)
			}
			h := modetest.Harness{Key: func(t *testing.T) string { return prefix + t.Name() }}
			if driver == "pgx" {
				h.Lock = func(t *testing.T) lock.Locker {
					return must[*sqllock.Locker](t)(sqllock.NewPgx(t.Context(), testsvc.OpenPgx(t, url)))
				}
				h.RW = func(t *testing.T) *rwlock.Locker {
					return must[*rwlock.Locker](t)(sqllock.NewPgxRW(t.Context(), testsvc.OpenPgx(t, url)))
				}
				h.Semaphore = func(t *testing.T) *semaphore.Client {
					return must[*semaphore.Client](t)(sqllock.NewPgxSemaphores(t.Context(), testsvc.OpenPgx(t, url)))
				}
			} else {
				h.Lock = func(t *testing.T) lock.Locker {
					l := must[*sqllock.Locker](t)(sqllock.New(t.Context(), stdDB(t), sqllock.Postgres))
					t.Cleanup(func() { _ = l.Close() })
					return l
				}
				h.RW = func(t *testing.T) *rwlock.Locker {
					return must[*rwlock.Locker](t)(sqllock.NewRW(t.Context(), stdDB(t), sqllock.Postgres))
				}
				h.Semaphore = func(t *testing.T) *semaphore.Client {
					return must[*semaphore.Client](t)(sqllock.NewSemaphores(t.Context(), stdDB(t), sqllock.Postgres))
				}
			}
			modetest.Run(t, h)
		})
	}
}

// must returns a function that fails t on a constructor's error and returns
// its value.
func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestOneNameOneResourceMySQL: the same on MariaDB (or MySQL), which has
// locks and semaphores.
func TestOneNameOneResourceMySQL(t *testing.T) {
	dsn := testsvc.MySQL(t, "interpolateParams", "true")
	// The tables once, before the parallel subtests.
	if _, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL); err != nil {
		t.Fatal(err)
	}
	modetest.Run(t, modetest.Harness{
		Lock: func(t *testing.T) lock.Locker {
			return must[*sqllock.Locker](t)(sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL))
		},
		Semaphore: func(t *testing.T) *semaphore.Client {
			return must[*semaphore.Client](t)(sqllock.NewSemaphores(t.Context(), openMySQL(t, dsn), sqllock.MySQL))
		},
		Key: func(t *testing.T) string { return t.Name() },
	})
}
