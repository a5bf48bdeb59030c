package sqllock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/semaphore"
	"github.com/latchkey-go/latchkey/semaphore/semaphoretest"
)

// semTable returns a semaphore table name unique to this run, so runs on
// the shared PostgreSQL never meet.
func semTable(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "semtest_" + hex.EncodeToString(b[:])
}

// cutters remembers how to cut each Client off from its database.
type cutters struct{ m sync.Map }

func (c *cutters) add(s *semaphore.Client, cut func()) *semaphore.Client {
	c.m.Store(s, cut)
	return s
}

func (c *cutters) cut(t *testing.T, s *semaphore.Client) {
	f, ok := c.m.Load(s)
	if !ok {
		t.Fatal("cut: unknown Client")
	}
	f.(func())()
}

func TestSemaphoreSQLiteConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sems.db")
	admin := openSQLite(t, path)
	var cuts cutters
	semaphoretest.Run(t, semaphoretest.Harness{
		// The suite's parallel tests all write to one file, one writer at a
		// time: a 1 s lease's renewal, waiting its turn for the write lock
		// on a loaded 2-core machine, once missed its deadline. A 2 s lease
		// gives it room, as in the suites of etcd and ZooKeeper.
		TTL: 2 * time.Second,
		// Each Client gets its own *sql.DB, as a separate process would.
		New: func(t *testing.T) *semaphore.Client {
			db := openSQLite(t, path)
			c, err := sqllock.NewSemaphores(t.Context(), db, sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return cuts.add(c, func() { _ = db.Close() })
		},
		Cut: cuts.cut,
		Revoke: func(t *testing.T, name string) {
			if _, err := admin.Exec(`DELETE FROM latchkey_semaphores_holders WHERE name = ?`, name); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestSemaphorePostgresConformance runs the suite on the shared PostgreSQL
// through pgx (LISTEN/NOTIFY) and through database/sql (polling).
func TestSemaphorePostgresConformance(t *testing.T) {
	url := testsvc.PostgresURL(t)
	admin := openPgx(t, url)
	table := semTable(t)
	t.Cleanup(func() {
		for _, tb := range []string{table, table + "_holders"} {
			_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+tb)
		}
		_, _ = admin.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+table+"_acquire_v1")
	})
	revoke := func(t *testing.T, name string) {
		if _, err := admin.Exec(t.Context(), "DELETE FROM "+table+"_holders WHERE name = $1", name); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("pgx", func(t *testing.T) {
		var cuts cutters
		semaphoretest.Run(t, semaphoretest.Harness{
			New: func(t *testing.T) *semaphore.Client {
				pool, err := pgxpool.New(t.Context(), url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				c, err := sqllock.NewPgxSemaphores(t.Context(), pool, sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				return cuts.add(c, pool.Close)
			},
			Cut:    cuts.cut,
			Revoke: revoke,
		})
	})
	t.Run("database-sql", func(t *testing.T) {
		var cuts cutters
		semaphoretest.Run(t, semaphoretest.Harness{
			New: func(t *testing.T) *semaphore.Client {
				db, err := sql.Open("pgx", url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				c, err := sqllock.NewSemaphores(t.Context(), db, sqllock.Postgres, sqllock.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				return cuts.add(c, func() { _ = db.Close() })
			},
			Cut:    cuts.cut,
			Revoke: revoke,
		})
	})
}

func TestSemaphoreMySQLConformance(t *testing.T) {
	dsn := testsvc.MySQL(t)
	admin := openMySQL(t, dsn)
	var cuts cutters
	semaphoretest.Run(t, semaphoretest.Harness{
		New: func(t *testing.T) *semaphore.Client {
			db := openMySQL(t, dsn)
			c, err := sqllock.NewSemaphores(t.Context(), db, sqllock.Detect)
			if err != nil {
				t.Fatal(err)
			}
			return cuts.add(c, func() { _ = db.Close() })
		},
		Cut: cuts.cut,
		Revoke: func(t *testing.T, name string) {
			if _, err := admin.Exec(`DELETE FROM latchkey_semaphores_holders WHERE name = ?`, name); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestSemaphoreBadInput(t *testing.T) {
	ctx := t.Context()
	if _, err := sqllock.NewSemaphores(ctx, nil, sqllock.SQLite); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewSemaphores(nil db) = %v, want ErrInvalid", err)
	}
	if _, err := sqllock.NewPgxSemaphores(ctx, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewPgxSemaphores(nil) = %v, want ErrInvalid", err)
	}
	db := openSQLite(t, filepath.Join(t.TempDir(), "x.db"))
	for _, table := range []string{"", "s; DROP TABLE x", "1abc", "a_very_long_table_name_that_leaves_no_room_for_its_suffix"} {
		if _, err := sqllock.NewSemaphores(ctx, db, sqllock.SQLite, sqllock.WithTable(table)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("WithTable(%q) = %v, want ErrInvalid", table, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad input created %d tables (%v)", n, err)
	}
	_ = time.Second
}
