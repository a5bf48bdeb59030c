package sqllock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

func TestSQLiteOperator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}

func TestPostgresOperator(t *testing.T) {
	url := testsvc.PostgresURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "ops_locks_" + hex.EncodeToString(b[:])
	admin := testsvc.OpenPgx(t, url)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_queue") })
	// Create the table once: concurrent CREATE TABLE IF NOT EXISTS collide.
	if _, err := sqllock.NewPgx(t.Context(), admin, sqllock.WithTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Run("pgx", func(t *testing.T) {
		locktest.RunOperator(t, locktest.Harness{
			New: func(t *testing.T) lock.Locker {
				l, err := sqllock.NewPgx(t.Context(), testsvc.OpenPgx(t, url), sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				return l
			},
		})
	})
	t.Run("database-sql", func(t *testing.T) {
		locktest.RunOperator(t, locktest.Harness{
			New: func(t *testing.T) lock.Locker {
				db := testsvc.OpenDB(t, "pgx", url)
				l, err := sqllock.New(t.Context(), db, sqllock.Postgres, sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				return l
			},
		})
	})
}
