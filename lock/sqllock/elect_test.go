package sqllock_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// TestElection runs the election suite on every dialect: PostgreSQL through
// pgx (observers woken by NOTIFY), SQLite (observers poll) and MySQL, each
// with its own table so the runs do not meet.
func TestElection(t *testing.T) {
	const table = "latchkey_elect_locks"
	newLocker := func(t *testing.T, db *sql.DB) lock.Locker {
		l, err := sqllock.New(t.Context(), db, sqllock.Detect, sqllock.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := testsvc.PostgresURL(t)
		electtest.Run(t, electtest.Harness{
			New: func(t *testing.T) lock.Locker {
				l, err := sqllock.NewPgx(t.Context(), testsvc.OpenPgx(t, url), sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "elect.db")
		electtest.Run(t, electtest.Harness{
			New: func(t *testing.T) lock.Locker { return newLocker(t, openSQLite(t, path)) },
		})
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		dsn := testsvc.MySQL(t)
		electtest.Run(t, electtest.Harness{
			New: func(t *testing.T) lock.Locker { return newLocker(t, openMySQL(t, dsn)) },
		})
	})
}
