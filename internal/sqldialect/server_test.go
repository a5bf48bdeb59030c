package sqldialect_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

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
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			db, err := sql.Open(c.driver, c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := sqldialect.Detect(db); got != c.d {
				t.Errorf("Detect = %v", got)
			}
			if err := c.d.Check(t.Context(), db, errInvalid); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if err := sqldialect.Dialect(99).Check(t.Context(), db, errInvalid); !errors.Is(err, errInvalid) {
				t.Errorf("Check of an unknown dialect = %v, want the caller's invalid", err)
			}
			before := time.Now()
			var ms, us, most int64
			if err := db.QueryRow(c.d.Fill(`SELECT {now_ms}, {now_us}, {greatest}(3, 7)`)).Scan(&ms, &us, &most); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			// The database runs on this machine's clock; a minute of slack
			// only tells the units apart.
			if at := time.UnixMilli(ms); at.Before(before.Add(-time.Minute)) || at.After(after.Add(time.Minute)) {
				t.Errorf("{now_ms} = %d (%v), not near %v", ms, at, before)
			}
			if d := us/1000 - ms; d < 0 || d > 1000 {
				t.Errorf("{now_us} = %d is not {now_ms} = %d in microseconds", us, ms)
			}
			if most != 7 {
				t.Errorf("{greatest}(3, 7) = %d", most)
			}
		})
	}
}

// TestCheckUnreachable: a server that cannot be asked is the database's
// error, not the caller's invalid argument.
func TestCheckUnreachable(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqldialect.Postgres.Check(t.Context(), db, errInvalid); err == nil || errors.Is(err, errInvalid) {
		t.Errorf("Check on no server = %v, want the connection's error", err)
	}
}
