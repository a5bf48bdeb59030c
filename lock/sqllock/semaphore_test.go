package sqllock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	dir := t.TempDir()
	// Each of the suite's tests gets its own file, shared by its Clients.
	// SQLite lets one writer in at a time and its busy handler retries in
	// no order, so a test that keeps the write lock busy by design
	// (NeverMoreThanN's twelve holders cycling through three permits) once
	// kept a renewal of another test waiting past its lease's deadline.
	file := func(t *testing.T) string {
		return filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".db")
	}
	var cuts cutters
	semaphoretest.Run(t, semaphoretest.Harness{
		// SQLite runs inside the test process, instrumented by -race like
		// the rest: on a 2-core machine at load 10, a 1 s lease's renewal,
		// due with 0.66 s left, missed its deadline even on a file of its
		// own. A 2 s lease gives it room, as in the suites of etcd and
		// ZooKeeper.
		TTL: 2 * time.Second,
		// Each Client gets its own *sql.DB, as a separate process would.
		New: func(t *testing.T) *semaphore.Client {
			db := openSQLite(t, file(t))
			c, err := sqllock.NewSemaphores(t.Context(), db, sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return cuts.add(c, func() { _ = db.Close() })
		},
		Cut: cuts.cut,
		Revoke: func(t *testing.T, name string) {
			admin := openSQLite(t, file(t))
			if _, err := admin.Exec(`DELETE FROM latchkey_semaphores_holders WHERE name = ?`, name); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestSemaphoreSQLiteRefusalTakesNoWriteLock checks that an acquisition that
// finds no room on SQLite is refused by a read, without waiting for the one
// write lock: waiters polling a full semaphore each took it, and kept a
// holder's renewal waiting past its lease's deadline.
func TestSemaphoreSQLiteRefusalTakesNoWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sems.db")
	newClient := func() *semaphore.Client {
		c, err := sqllock.NewSemaphores(ctx, openSQLite(t, path), sqllock.SQLite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := newClient(), newClient()
	sa, err := a.Semaphore("full", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sa.Acquire(ctx, lock.WithTTL(time.Minute), lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Release(context.Background()) }()

	holdWriteLock(t, path) // as another process would, until the checks are done

	// Without the read each attempt would wait for the write lock until its
	// context ends; the bound is a failure timeout.
	check := func(n int, want error) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		sb, err := b.Semaphore("full", n)
		if err != nil {
			t.Fatal(err)
		}
		if q, err := sb.Acquire(actx, lock.WithWait(0)); !errors.Is(err, want) {
			if q != nil {
				_ = q.Release(ctx)
			}
			t.Fatalf("try-once of N=%d while the write lock is held = %v, want %v", n, err, want)
		}
	}
	check(1, lock.ErrNotAcquired)
	check(2, semaphore.ErrMismatch)
}

// TestSemaphorePostgresConformance runs the suite on the shared PostgreSQL
// through pgx (LISTEN/NOTIFY) and through database/sql (polling).
func TestSemaphorePostgresConformance(t *testing.T) {
	url := testsvc.PostgresURL(t)
	admin := testsvc.OpenPgx(t, url)
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
				pool := testsvc.OpenPgx(t, url)
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
				db := testsvc.OpenDB(t, "pgx", url)
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
