package sqlconn_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db := testsvc.OpenDB(t, "sqlite", filepath.Join(t.TempDir(), "c.db"), testsvc.MaxOpenConns(0))
	if _, err := db.Exec(`CREATE TABLE t (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// InTx commits when fn succeeds and rolls back when it fails or panics.
func TestInTx(t *testing.T) {
	db := openSQLite(t)
	c, ctx := sqlconn.StdDB(db), context.Background()
	boom := errors.New("boom")
	insert := func(k string, err error) func(sqlconn.Tx) error {
		return func(tx sqlconn.Tx) error {
			if _, e := tx.Exec(ctx, `INSERT INTO t VALUES (?)`, k); e != nil {
				return e
			}
			if err != nil {
				panic(err)
			}
			return nil
		}
	}
	if err := sqlconn.InTx(ctx, c, nil, insert("kept", nil)); err != nil {
		t.Fatal(err)
	}
	if err := sqlconn.InTx(ctx, c, nil, func(tx sqlconn.Tx) error {
		_, _ = tx.Exec(ctx, `INSERT INTO t VALUES ('failed')`)
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want fn's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = sqlconn.InTx(ctx, c, nil, insert("panicked", boom))
	}()
	keys, err := sqlconn.Strings(ctx, c, `SELECT k FROM t ORDER BY k`)
	if err != nil || len(keys) != 1 || keys[0] != "kept" {
		t.Fatalf("rows %q, %v; want only the committed one", keys, err)
	}
	var k string
	if ok, err := sqlconn.ScanOne(c.QueryRow(ctx, `SELECT k FROM t WHERE k = 'none'`), &k); ok || err != nil {
		t.Fatalf("ScanOne of no row = %v, %v; want false, nil", ok, err)
	}
}

// twoMethods is a handle with only what fence/sqlfence and state need.
type twoMethods struct{ db *sql.DB }

func (h twoMethods) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return h.db.ExecContext(ctx, q, args...)
}

func (h twoMethods) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return h.db.QueryRowContext(ctx, q, args...)
}

func TestStdWithoutQueryContext(t *testing.T) {
	c, ctx := sqlconn.Std(twoMethods{openSQLite(t)}), context.Background()
	if n, err := sqlconn.Affected(c.Exec(ctx, `INSERT INTO t VALUES ('a')`)); err != nil || n != 1 {
		t.Fatalf("Exec = %d, %v", n, err)
	}
	if _, err := c.Query(ctx, `SELECT k FROM t`); err == nil {
		t.Fatal("Query on a handle without QueryContext answered")
	}
}
