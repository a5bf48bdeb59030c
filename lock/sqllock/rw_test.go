package sqllock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

// rwTable returns a table name of its own for one test.
func rwTable() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "rw_" + hex.EncodeToString(b[:])
}

// openRW opens a read-write Locker from "kind dsn table", kind being
// sqlite, pgx or sql (PostgreSQL through database/sql).
func openRW(ctx context.Context, config string) (*rwlock.Locker, func(), error) {
	f := strings.Fields(config)
	if len(f) != 3 {
		return nil, nil, fmt.Errorf("config %q: want kind dsn table", config)
	}
	kind, dsn, table := f[0], f[1], sqllock.WithTable(f[2])
	switch kind {
	case "pgx":
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		l, err := sqllock.NewPgxRW(ctx, pool, table)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return l, pool.Close, nil
	case "sqlite", "sql":
		driver := "pgx"
		if kind == "sqlite" {
			driver, dsn = "sqlite", sqliteDSN(dsn)
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(16)
		if kind == "sqlite" {
			// One connection per process, as the package doc says: with
			// sixteen, forty waiting readers' polls beat a writer's
			// release to SQLite's unfair busy handler for over 5 s.
			db.SetMaxOpenConns(1)
		}
		l, err := sqllock.NewRW(ctx, db, sqllock.Detect, table)
		if err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		return l, func() { _ = db.Close() }, nil
	}
	return nil, nil, fmt.Errorf("config %q: unknown kind", config)
}

var rwTarget = rwlocktest.Target{
	Name: "sql",
	Open: func(ctx context.Context, config string) (*rwlock.Locker, error) {
		l, _, err := openRW(ctx, config) // the child's connections end with it
		return l, err
	},
}

// rwConfigs are the configurations the read-write tests run in.
func rwConfigs(t *testing.T) map[string]string {
	pg := testsvc.PostgresURL(t)
	return map[string]string{
		"sqlite":       "sqlite " + filepath.Join(t.TempDir(), "rw.db") + " " + rwTable(),
		"pgx":          "pgx " + pg + " " + rwTable(),
		"database-sql": "sql " + pg + " " + rwTable(),
	}
}

func TestRWConformance(t *testing.T) {
	for name, config := range rwConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rwlocktest.Run(t, rwlocktest.Harness{
				// SQLite serialises writers on one file: under -race,
				// beside the rest of the suite, a renewal can queue
				// behind other writers for longer than a third of 1 s.
				TTL: 3 * time.Second,
				New: func(t *testing.T) *rwlock.Locker {
					l, closeDB, err := openRW(t.Context(), config)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(closeDB)
					return l
				},
			})
		})
	}
}

func TestRWProcesses(t *testing.T) {
	for name, config := range rwConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Create the tables before the children race to.
			l, closeDB, err := openRW(t.Context(), config)
			if err != nil {
				t.Fatal(err)
			}
			defer closeDB()
			defer l.Close()
			rwlocktest.RunProcesses(t, rwTarget, config)
		})
	}
}

func TestRWBadInput(t *testing.T) {
	ctx := t.Context()
	if _, err := sqllock.NewRW(ctx, nil, sqllock.SQLite); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewRW(nil) = %v, want ErrInvalid", err)
	}
	if _, err := sqllock.NewPgxRW(ctx, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewPgxRW(nil) = %v, want ErrInvalid", err)
	}
	db := testsvc.OpenDB(t, "sqlite", sqliteDSN(filepath.Join(t.TempDir(), "bad.db")), testsvc.MaxOpenConns(0))
	for _, table := range []string{"", "x-y", "a;drop", strings.Repeat("t", 60)} {
		if _, err := sqllock.NewRW(ctx, db, sqllock.SQLite, sqllock.WithTable(table)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("table %q: %v, want ErrInvalid", table, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Errorf("bad input created %d tables (%v)", n, err)
	}
}
