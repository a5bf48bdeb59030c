package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// database is one server the tests run on.
type database struct {
	name, driver string
	dsn          func(t *testing.T) string
}

var databases = []database{
	{"sqlite", "sqlite", func(t *testing.T) string { return sqliteDSN(filepath.Join(t.TempDir(), "fence.db")) }},
	{"postgres", "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }},
	// MariaDB under both isolation levels a MySQL user runs: REPEATABLE
	// READ's snapshot is the one a read after a write must not trust.
	{"mysql-read-committed", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "READ-COMMITTED")...)
	}},
	{"mysql-repeatable-read", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "REPEATABLE-READ")...)
	}},
}

// isMySQL reports whether the database is MySQL or MariaDB.
func (d database) isMySQL() bool { return d.driver == "mysql" }

// keyType is the type of a text primary key: MySQL indexes no TEXT column
// whole.
func keyType(db *sql.DB) string {
	if fmt.Sprintf("%T", db.Driver()) == "*mysql.MySQLDriver" {
		return "VARCHAR(64)"
	}
	return "TEXT"
}

func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
}

// inventoryTable creates a table unique to the test and drops it at cleanup.
func inventoryTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	table := testsvc.TableName("fence_inv_")
	_, err := db.Exec(fmt.Sprintf(`CREATE TABLE %s (id %s PRIMARY KEY, qty BIGINT, note TEXT, fence_token BIGINT DEFAULT 0)`, table, keyType(db)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE " + table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	return table
}

func forEachDB(t *testing.T, f func(t *testing.T, db *sql.DB, table string)) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := testsvc.OpenDB(t, d.driver, d.dsn(t))
			f(t, db, inventoryTable(t, db))
		})
	}
}

func row(t *testing.T, db *sql.DB, g *sqlfence.Guard, table, id string) (qty int64, token uint64) {
	t.Helper()
	if err := db.QueryRow(fmt.Sprintf("SELECT qty FROM %s WHERE id = '%s'", table, id)).Scan(&qty); err != nil {
		t.Fatal(err)
	}
	token, err := g.Token(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return qty, token
}

func TestUpdate(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		ctx := t.Context()
		g := guardOn(t, db, table)
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s (id, qty) VALUES ('a', 10)", table)); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			token uint64
			qty   int64
			want  error
		}{
			{5, 9, nil},
			{5, 8, nil}, // the same holder writes again
			{4, 0, fence.ErrStale},
			{7, 7, nil},
			{6, 0, fence.ErrStale},
			{7, 6, nil},
		}
		wantQty, wantToken := int64(10), uint64(0)
		for _, s := range steps {
			err := g.Update(ctx, fence.Token(s.token), "a", sqlfence.Values{"qty": s.qty})
			if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
				t.Fatalf("token %d: err %v, want %v", s.token, err, s.want)
			}
			if s.want == nil {
				wantQty, wantToken = s.qty, s.token
			}
			if qty, token := row(t, db, g, table, "a"); qty != wantQty || token != wantToken {
				t.Fatalf("after token %d: row (%d, %d), want (%d, %d)", s.token, qty, token, wantQty, wantToken)
			}
		}
		if err := g.Update(ctx, fence.Token(100), "missing", sqlfence.Values{"qty": 1}); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("missing row: %v", err)
		}
		// A NULL token counts as 0.
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s (id, qty, fence_token) VALUES ('n', 1, NULL)", table)); err != nil {
			t.Fatal(err)
		}
		if err := g.Update(ctx, fence.Token(1), "n", sqlfence.Values{"qty": 2, "note": "x"}); err != nil {
			t.Fatalf("NULL token: %v", err)
		}
	})
}

func TestUpsert(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		ctx := t.Context()
		g := guardOn(t, db, table, sqlfence.WithKeyColumn("id"), sqlfence.WithTokenColumn("fence_token"))
		for _, s := range []struct {
			token uint64
			qty   int64
			want  error
		}{{3, 1, nil}, {3, 2, nil}, {2, 99, fence.ErrStale}, {9, 3, nil}, {8, 99, fence.ErrStale}} {
			err := g.Upsert(ctx, fence.Token(s.token), "b", sqlfence.Values{"qty": s.qty})
			if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
				t.Fatalf("token %d: err %v, want %v", s.token, err, s.want)
			}
		}
		if qty, token := row(t, db, g, table, "b"); qty != 3 || token != 9 {
			t.Fatalf("row (%d, %d), want (3, 9)", qty, token)
		}
	})
}

// TestConcurrentWriters races writers with distinct tokens on one row: at the
// end the row must hold the highest token's value, every write with a lower
// token than one applied before it must have been refused, and no writer may
// see anything but success or ErrStale. A read-then-write guard fails this.
func TestConcurrentWriters(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		ctx := t.Context()
		g := guardOn(t, db, table)
		const writers, perWriter = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*perWriter)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					tok := uint64(i*writers + w + 1) // distinct, interleaved
					writeAndCheck(ctx, db, g, table, tok, i%2 == 0, errs)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// The last writer of the highest token (writers*perWriter) used
		// Update or Upsert; either way it must have been applied.
		if qty, token := row(t, db, g, table, "c"); token != writers*perWriter || qty != int64(token) {
			t.Fatalf("row (%d, %d), want the highest token %d", qty, token, writers*perWriter)
		}
	})
}

// writeAndCheck writes tok as row c's qty with token tok, by Upsert or
// Update, and reads the row back. It sends on errs the write's error unless
// it is ErrStale or ErrNotFound, and an error if the row holds a qty other
// than its token: the value written always equals the token, so the row is
// consistent iff qty == fence_token.
func writeAndCheck(ctx context.Context, db *sql.DB, g *sqlfence.Guard, table string, tok uint64, upsert bool, errs chan<- error) {
	write := g.Update
	if upsert {
		write = g.Upsert
	}
	err := write(ctx, fence.Token(tok), "c", sqlfence.Values{"qty": int64(tok)})
	if err != nil && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrNotFound) {
		errs <- err
	}
	var qty, token int64
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT qty, fence_token FROM %s WHERE id = 'c'", table)).Scan(&qty, &token); err == nil && qty != token {
		errs <- fmt.Errorf("row holds qty %d with token %d", qty, token)
	}
}

func TestInTransaction(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		ctx := t.Context()
		g := guardOn(t, db, table)
		if err := g.Upsert(ctx, fence.Token(5), "d", sqlfence.Values{"qty": 1}); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.In(tx).Update(ctx, fence.Token(6), "d", sqlfence.Values{"qty": 2}); err != nil {
			t.Fatal(err)
		}
		if err := g.In(tx).Update(ctx, fence.Token(5), "d", sqlfence.Values{"qty": 3}); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale write inside the transaction: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if qty, token := row(t, db, g, table, "d"); qty != 1 || token != 5 {
			t.Fatalf("after rollback: (%d, %d), want (1, 5)", qty, token)
		}
	})
}

// TestBadInput: bad input is refused before any statement runs (the table
// does not even exist).
func TestBadInput(t *testing.T) {
	db := testsvc.OpenDB(t, "sqlite", sqliteDSN(filepath.Join(t.TempDir(), "x.db")))
	for _, bad := range [][]sqlfence.Option{
		{sqlfence.WithKeyColumn("id; DROP TABLE x")},
		{sqlfence.WithTokenColumn("")},
		{sqlfence.WithKeyColumn("t"), sqlfence.WithTokenColumn("t")},
	} {
		if _, err := sqlfence.New(db, "no_such_table", bad...); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("New accepted bad options: %v", err)
		}
	}
	for _, table := range []string{"", "a b", "x;--", "a.b.c"} {
		if _, err := sqlfence.New(db, table); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("New(%q): %v", table, err)
		}
	}
	if _, err := sqlfence.New(nil, "t"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	g := guardOn(t, db, "no_such_table")
	ctx := t.Context()
	for name, err := range map[string]error{
		"nil holder":  g.Update(ctx, nil, "k", sqlfence.Values{"a": 1}),
		"token 0":     g.Update(ctx, fence.Token(0), "k", sqlfence.Values{"a": 1}),
		"huge token":  g.Upsert(ctx, fence.Token(math.MaxUint64), "k", sqlfence.Values{"a": 1}),
		"no values":   g.Upsert(ctx, fence.Token(1), "k", nil),
		"bad column":  g.Update(ctx, fence.Token(1), "k", sqlfence.Values{"a)--": 1}),
		"sets token":  g.Update(ctx, fence.Token(1), "k", sqlfence.Values{"fence_token": 1}),
		"sets the id": g.Upsert(ctx, fence.Token(1), "k", sqlfence.Values{"id": 1}),
	} {
		if !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUnknownDriver(t *testing.T) {
	db := sql.OpenDB(fakeConnector{})
	if _, err := sqlfence.New(db, "t"); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("unknown driver: %v", err)
	}
	if _, err := sqlfence.New(db, "t", sqlfence.WithDialect(sqlfence.Postgres)); err != nil {
		t.Fatalf("explicit dialect: %v", err)
	}
}
