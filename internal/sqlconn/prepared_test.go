package sqlconn_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// openCounted opens a pool of one connection on MariaDB whose round trips
// c counts, and the PreparedDB on it.
func openCounted(t *testing.T, params ...string) (*sqlconn.PreparedDB, *sqlcount.Counter) {
	t.Helper()
	c := new(sqlcount.Counter)
	db, err := sqlcount.Open("mysql", testsvc.MySQL(t, params...), c)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	p := sqlconn.Prepared(db, sqldialect.Unprepared)
	t.Cleanup(func() { _ = p.Close() })
	return p, c
}

// roundTrips runs op and returns the round trips it took.
func roundTrips(t *testing.T, c *sqlcount.Counter, op func() error) int64 {
	t.Helper()
	before := c.Load()
	if err := op(); err != nil {
		t.Fatal(err)
	}
	return c.Load() - before
}

// TestPreparedRunsAStatementInOneRoundTrip: go-sql-driver without
// interpolateParams=true prepares, executes and closes every statement with
// arguments, two round trips; prepared once, a statement is one from its
// second run on, and its answers are the same.
func TestPreparedRunsAStatementInOneRoundTrip(t *testing.T) {
	p, c := openCounted(t)
	ctx := t.Context()
	if _, err := p.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	insert := func(k int) func() error {
		return func() error {
			res, err := p.Exec(ctx, "INSERT INTO t VALUES (?, LAST_INSERT_ID(? * 10))", k, k)
			if err != nil {
				return err
			}
			if id, err := res.LastInsertId(); err != nil || id != int64(k*10) {
				t.Errorf("LastInsertId = %d, %v; want %d", id, err, k*10)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				t.Errorf("RowsAffected = %d, %v; want 1", n, err)
			}
			return nil
		}
	}
	if got := roundTrips(t, c, insert(1)); got != 2 {
		t.Errorf("first run: %d round trips, want 2 (prepare, execute)", got)
	}
	if got := roundTrips(t, c, insert(2)); got != 1 {
		t.Errorf("second run: %d round trips, want 1", got)
	}
	var v int
	read := func() error { return p.QueryRow(ctx, "SELECT v FROM t WHERE k = ?", 2).Scan(&v) }
	roundTrips(t, c, read)
	if got := roundTrips(t, c, read); got != 1 || v != 20 {
		t.Errorf("second query: %d round trips, v = %d; want 1, 20", got, v)
	}
	if err := p.QueryRow(ctx, "SELECT v FROM t WHERE k = ?", 3).Scan(&v); err != sql.ErrNoRows {
		t.Errorf("query of no row: %v, want sql.ErrNoRows", err)
	}
}

// TestPreparedRunsWhatTheServerWillNotPrepare: a statement the server
// refuses to prepare runs unprepared, and is not offered again.
func TestPreparedRunsWhatTheServerWillNotPrepare(t *testing.T) {
	p, c := openCounted(t, "interpolateParams", "true")
	ctx := t.Context()
	// MariaDB answers ER_UNSUPPORTED_PS to preparing PREPARE; as text it
	// runs.
	run := func() error { _, err := p.Exec(ctx, "PREPARE latchkey_probe FROM 'SELECT 1'"); return err }
	if got := roundTrips(t, c, run); got != 2 {
		t.Errorf("first run: %d round trips, want 2 (the refused preparation, the statement)", got)
	}
	if got := roundTrips(t, c, run); got != 1 {
		t.Errorf("second run: %d round trips, want 1 (no preparation again)", got)
	}
}

// TestPreparedAfterClose: after Close, statements still run, unprepared.
func TestPreparedAfterClose(t *testing.T) {
	p, c := openCounted(t)
	ctx := t.Context()
	var n int
	read := func() error { return p.QueryRow(ctx, "SELECT ? + 1", 41).Scan(&n) }
	roundTrips(t, c, read)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := roundTrips(t, c, read); got != 2 || n != 42 {
			t.Errorf("after Close: %d round trips, answer %d; want 2 (unprepared: prepare, execute), 42", got, n)
		}
	}
}

// TestPreparedCloseWhileRunning: statements running while Close closes
// theirs neither fail nor run on a closed statement; those after it run
// unprepared.
func TestPreparedCloseWhileRunning(t *testing.T) {
	c := new(sqlcount.Counter)
	db, err := sqlcount.Open("mysql", testsvc.MySQL(t), c)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	p := sqlconn.Prepared(db, sqldialect.Unprepared)
	ctx := t.Context()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 200 {
				var n int
				if err := p.QueryRow(ctx, "SELECT ? + ?", g, i).Scan(&n); err != nil || n != g+i {
					errs <- fmt.Errorf("goroutine %d, run %d: %d, %v", g, i, n, err)
					return
				}
				if _, err := p.Exec(ctx, "DO ?", i); err != nil {
					errs <- fmt.Errorf("goroutine %d, run %d: %v", g, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for c.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
