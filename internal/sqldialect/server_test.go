package sqldialect_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

var errInvalid = errors.New("invalid")

// TestServers runs each dialect's fragments and version check on a real
// server: the clock is in the units it claims, and the servers here are new
// enough.
func TestServers(t *testing.T) {
	for _, c := range []struct {
		d           sqldialect.Dialect
		driver, dsn string
	}{
		{sqldialect.Postgres, "pgx", testsvc.PostgresURL(t)},
		{sqldialect.SQLite, "sqlite", filepath.Join(t.TempDir(), "clock.db")},
		{sqldialect.MySQL, "mysql", testsvc.MySQLServerDSN(t)},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			db := testsvc.OpenDB(t, c.driver, c.dsn, testsvc.MaxOpenConns(0))
			if got := sqldialect.Detect(db); got != c.d {
				t.Errorf("Detect = %v", got)
			}
			if err := c.d.Check(t.Context(), sqlconn.Std(db), errInvalid); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if err := sqldialect.Dialect(99).Check(t.Context(), sqlconn.Std(db), errInvalid); !errors.Is(err, errInvalid) {
				t.Errorf("Check of an unknown dialect = %v, want the caller's invalid", err)
			}
			checkClock(t, db, c.d)
		})
	}
}

// checkClock reads d's {now_ms}, {now_us} and {greatest} on db: the clock
// is near this machine's, in the units it claims.
func checkClock(t *testing.T, db *sql.DB, d sqldialect.Dialect) {
	t.Helper()
	before := time.Now()
	var ms, us, most int64
	if err := db.QueryRow(d.Fill(`SELECT {now_ms}, {now_us}, {greatest}(3, 7)`)).Scan(&ms, &us, &most); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	// The database runs on this machine's clock; a minute of slack only
	// tells the units apart.
	if at := time.UnixMilli(ms); at.Before(before.Add(-time.Minute)) || at.After(after.Add(time.Minute)) {
		t.Errorf("{now_ms} = %d (%v), not near %v", ms, at, before)
	}
	if d := us/1000 - ms; d < 0 || d > 1000 {
		t.Errorf("{now_us} = %d is not {now_ms} = %d in microseconds", us, ms)
	}
	if most != 7 {
		t.Errorf("{greatest}(3, 7) = %d", most)
	}
}

// TestCheckUnreachable: a server that cannot be asked is the database's
// error, not the caller's invalid argument.
func TestCheckUnreachable(t *testing.T) {
	db := testsvc.OpenDB(t, "pgx", "postgres://127.0.0.1:1/none?connect_timeout=1")
	if err := sqldialect.Postgres.Check(t.Context(), sqlconn.Std(db), errInvalid); err == nil || errors.Is(err, errInvalid) {
		t.Errorf("Check on no server = %v, want the connection's error", err)
	}
}

// TestMySQLClockIgnoresTimeZone: the clock is UTC arithmetic, so a session
// whose time zone observes daylight saving time reads the same instant.
func TestMySQLClockIgnoresTimeZone(t *testing.T) {
	db := testsvc.OpenDB(t, "mysql", testsvc.MySQLServerDSN(t), testsvc.MaxOpenConns(1))
	var utc, shifted int64
	q := sqldialect.MySQL.Fill(`SELECT {now_ms}`)
	if err := db.QueryRow(q).Scan(&utc); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SET time_zone = '+05:00'`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(q).Scan(&shifted); err != nil {
		t.Fatal(err)
	}
	if d := shifted - utc; d < 0 || d > 60_000 {
		t.Errorf("{now_ms} moved by %d ms with the session's time zone", d)
	}
}

// TestMySQLMatchedMarker: the LAST_INSERT_ID(expr) marker tells a matched
// UPDATE that changed nothing from one that matched no row, whatever the
// client's CLIENT_FOUND_ROWS setting, where the affected-row count cannot.
func TestMySQLMatchedMarker(t *testing.T) {
	for _, found := range []string{"false", "true"} {
		t.Run("clientFoundRows="+found, func(t *testing.T) {
			db := testsvc.OpenDB(t, "mysql", testsvc.MySQL(t, "clientFoundRows", found), testsvc.MaxOpenConns(1)) // the marker must not leak across statements of one connection
			if _, err := db.Exec(`CREATE TABLE m (k VARBINARY(10) PRIMARY KEY, v BIGINT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO m VALUES ('a', 7)`); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				k    string
				want int64
			}{{"a", 7}, {"b", 0}, {"a", 7}} {
				res, err := db.Exec(`UPDATE m SET v = LAST_INSERT_ID(?) WHERE k = ?`, 7, c.k)
				if err != nil {
					t.Fatal(err)
				}
				if id, err := res.LastInsertId(); err != nil || id != c.want {
					t.Errorf("UPDATE of %q setting what it holds: LastInsertId = %d (%v), want %d", c.k, id, err, c.want)
				}
			}
		})
	}
}

// TestRetryableOnMySQL: a lock wait timeout is ErrRetry, with the driver's
// error still in the chain.
func TestRetryableOnMySQL(t *testing.T) {
	dsn := testsvc.MySQL(t)
	db := testsvc.OpenDB(t, "mysql", dsn)
	if _, err := db.Exec(`CREATE TABLE r (k INT PRIMARY KEY, v INT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO r VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec(`UPDATE r SET v = 1 WHERE k = 1`); err != nil {
		t.Fatal(err)
	}
	waiter, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Rollback()
	if _, err := waiter.Exec(`SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = waiter.Exec(`UPDATE r SET v = 2 WHERE k = 1`)
	if err == nil {
		t.Fatal("a second writer of a locked row did not wait")
	}
	got := sqldialect.Retryable(err)
	if !errors.Is(got, sqldialect.ErrRetry) || !errors.Is(got, err) {
		t.Errorf("Retryable(%v) = %v, want ErrRetry wrapping it", err, got)
	}
	if other := errors.New("x"); sqldialect.Retryable(other) != other || sqldialect.Retryable(nil) != nil {
		t.Error("Retryable changed an error that is not a conflict")
	}
}

// TestUpserts runs OnConflict, Excluded, DoNothing and the {key} column type
// on each server: a kept row is reported as 0 affected rows, a new one as 1,
// and an upsert replaces the value; keys differing only in case are two rows.
func TestUpserts(t *testing.T) {
	for _, c := range []struct {
		d           sqldialect.Dialect
		driver, dsn string
	}{
		{sqldialect.Postgres, "pgx", testsvc.PostgresURL(t)},
		{sqldialect.SQLite, "sqlite", filepath.Join(t.TempDir(), "upsert.db")},
		{sqldialect.MySQL, "mysql", testsvc.MySQL(t)},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			db := testsvc.OpenDB(t, c.driver, c.dsn, testsvc.MaxOpenConns(0))
			table := testsvc.TableName("upsert_")
			if _, err := db.Exec(c.d.Fill("CREATE TABLE {t} (k {key} PRIMARY KEY, v BIGINT NOT NULL)", "{t}", table)); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = db.Exec("DROP TABLE " + table) }()
			keep := c.d.Fill("INSERT INTO {t} (k, v) VALUES ($1, $2) "+c.d.DoNothing("k"), "{t}", table)
			for i, want := range []int64{1, 0, 1} {
				k := []string{"a", "a", "A"}[i]
				n, err := sqlconn.Affected(db.Exec(keep, k, i))
				if err != nil || n != want {
					t.Fatalf("insert %d of %q: %d rows, %v; want %d", i, k, n, err, want)
				}
			}
			set := c.d.Fill("INSERT INTO {t} (k, v) VALUES ($1, $2) "+c.d.OnConflict("k")+" v = "+c.d.Excluded("v"), "{t}", table)
			if _, err := db.Exec(set, "a", 42); err != nil {
				t.Fatal(err)
			}
			var v, n int64
			if err := db.QueryRow(c.d.Fill("SELECT v, (SELECT COUNT(*) FROM {t}) FROM {t} WHERE k = $1", "{t}", table), "a").Scan(&v, &n); err != nil || v != 42 || n != 2 {
				t.Fatalf("after the upsert: v %d, %d rows, %v; want 42 and 2", v, n, err)
			}
		})
	}
}

// TestUnpreparedOnMySQL: the server's refusal to prepare a statement is
// Unprepared, wrapped or not; a statement it could not parse is not (it
// would fail unprepared too).
func TestUnpreparedOnMySQL(t *testing.T) {
	db := testsvc.OpenDB(t, "mysql", testsvc.MySQL(t))
	_, refused := db.Prepare("DEALLOCATE PREPARE latchkey_probe")
	if refused == nil || !sqldialect.Unprepared(refused) || !sqldialect.Unprepared(fmt.Errorf("sqllock: %w", refused)) {
		t.Errorf("Unprepared(%v) = false, want true (ER_UNSUPPORTED_PS)", refused)
	}
	_, syntax := db.Prepare("SELEC 1")
	if syntax == nil || sqldialect.Unprepared(syntax) {
		t.Errorf("Unprepared(%v) = true, want false (a syntax error)", syntax)
	}
	if sqldialect.Unprepared(nil) || sqldialect.Unprepared(errors.New("sql: statement is closed")) {
		t.Error("Unprepared is true for nil or an error not the server's")
	}
}
