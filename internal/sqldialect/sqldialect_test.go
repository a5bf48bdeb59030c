package sqldialect

import (
	"strings"
	"testing"
)

func TestFromDriverType(t *testing.T) {
	for name, want := range map[string]Dialect{
		"*stdlib.Driver":        Postgres,
		"*pq.Driver":            Postgres,
		"*sqlite.Driver":        SQLite,
		"*sqlite3.SQLiteDriver": SQLite,
		"*mysql.MySQLDriver":    MySQL,
		"*mssql.Driver":         Unknown,
	} {
		if got := FromDriverType(name); got != want {
			t.Errorf("FromDriverType(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRebind(t *testing.T) {
	q := "UPDATE t SET a = $1 WHERE b = $2 AND c <= $1 AND d = $12"
	if got := Postgres.Rebind(q); got != q {
		t.Errorf("postgres: %q", got)
	}
	if got, want := SQLite.Rebind(q), "UPDATE t SET a = ?1 WHERE b = ?2 AND c <= ?1 AND d = ?12"; got != want {
		t.Errorf("sqlite: %q, want %q", got, want)
	}
	if got, want := MySQL.Rebind("UPDATE t SET a = $1 WHERE b = $2 AND c = $3"), "UPDATE t SET a = ? WHERE b = ? AND c = ?"; got != want {
		t.Errorf("mysql: %q, want %q", got, want)
	}
	// ? is filled in order: a statement that reuses or reorders numbers is
	// left for the server to refuse, never filled with the wrong values.
	for _, bad := range []string{q, "UPDATE t SET a = $2 WHERE b = $1"} {
		if got := MySQL.Rebind(bad); got != bad {
			t.Errorf("mysql rebound %q to %q", bad, got)
		}
	}
}

func TestIdentLimits(t *testing.T) {
	for _, d := range []Dialect{Postgres, SQLite, MySQL} {
		if m := d.MaxIdent(); m != 0 && m < MaxIdent {
			t.Errorf("%v allows %d bytes, below MaxIdent %d", d, m, MaxIdent)
		}
	}
	if MySQL.MaxIdent() != 64 || Postgres.MaxIdent() != 63 || SQLite.MaxIdent() != 0 {
		t.Errorf("MaxIdent: mysql %d, postgres %d, sqlite %d", MySQL.MaxIdent(), Postgres.MaxIdent(), SQLite.MaxIdent())
	}
}

func TestIdentifiers(t *testing.T) {
	for _, ok := range []string{"a", "_x", "fence_token", "T1"} {
		if err := Ident("column", ok); err != nil {
			t.Errorf("Ident(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1a", "a b", "a;drop", `"a"`, "a.b", "é"} {
		if Ident("column", bad) == nil {
			t.Errorf("Ident(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"orders", "billing.orders"} {
		if err := Table(ok); err != nil {
			t.Errorf("Table(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"a.b.c", ".a", "a.", "a;b"} {
		if Table(bad) == nil {
			t.Errorf("Table(%q) accepted", bad)
		}
	}
	if Bare("billing.orders") != "orders" || Bare("orders") != "orders" {
		t.Error("Bare")
	}
	max := strings.Repeat("a", MaxIdent)
	if Ident("column", max) != nil || Table(max) != nil || Table("s."+max) != nil {
		t.Errorf("a %d-byte name refused", MaxIdent)
	}
	if Ident("column", max+"a") == nil || Table(max+"a") == nil {
		t.Errorf("a %d-byte name accepted", MaxIdent+1)
	}
}

// TestDerivedNamesFit: a name made from a caller's by a suffix (an index, a
// channel) must fit MaxIdent too, or PostgreSQL cuts it short.
func TestDerivedNamesFit(t *testing.T) {
	room := strings.Repeat("t", MaxIdent-len("_expires"))
	if err := Table(room, "_expires"); err != nil {
		t.Errorf("Table(%d bytes, _expires): %v", len(room), err)
	}
	if err := Table("billing."+room, "_expires"); err != nil {
		t.Errorf("the schema does not count: %v", err)
	}
	if err := Table(room+"t", "_expires"); err == nil {
		t.Errorf("Table(%d bytes, _expires) accepted", len(room)+1)
	}
	if err := Ident("table", room+"t", "_x", "_expires"); err == nil || !strings.Contains(err.Error(), "_expires") {
		t.Errorf("Ident(%d bytes, _expires) = %v, want an error naming the longest suffix", len(room)+1, err)
	}
}

func TestFill(t *testing.T) {
	q := "SELECT {now_ms}, {greatest}(a, $1) FROM {t} WHERE b = $2 -- {blob}"
	if got, want := Postgres.Fill(q, "{t}", "x"),
		"SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, GREATEST(a, $1) FROM x WHERE b = $2 -- BYTEA"; got != want {
		t.Errorf("postgres:\n%s\nwant\n%s", got, want)
	}
	if got := SQLite.Fill(q, "{t}", "x"); !strings.Contains(got, "MAX(a, ?1) FROM x WHERE b = ?2 -- BLOB") || !strings.Contains(got, "julianday") {
		t.Errorf("sqlite: %s", got)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		d        Dialect
		reported string
		ok       bool
	}{
		{Postgres, "120000", true},
		{Postgres, "160002", true},
		{Postgres, " 170000\n", true},
		{Postgres, "110022", false},
		{Postgres, "90624", false}, // 9.6.24
		{Postgres, "16.2", false},  // not server_version_num
		{SQLite, "3.35.0", true},
		{SQLite, "3.35", true},
		{SQLite, "3.46.1", true},
		{SQLite, "4.0.0", true},
		{SQLite, "3.34.1", false},
		{SQLite, "2.8.17", false},
		{SQLite, "3.x", false},
		{MySQL, "8.0.36", true},
		{MySQL, "8.4.0-log", true},
		{MySQL, "5.7.44", false},
		{MySQL, "10.11.6-MariaDB-0+deb12u1", true},
		{MySQL, "5.5.5-10.11.6-MariaDB", true},
		{MySQL, "10.6.0-MariaDB", true},
		{MySQL, "10.5.23-MariaDB", false}, // no JSON_TABLE
		{MySQL, "MariaDB", false},
		{Unknown, "1", false},
	} {
		if err := c.d.CheckVersion(c.reported); (err == nil) != c.ok {
			t.Errorf("%v.CheckVersion(%q) = %v, want ok %v", c.d, c.reported, err, c.ok)
		}
	}
	if err := SQLite.CheckVersion("3.34.1"); err == nil || !strings.Contains(err.Error(), "3.35") {
		t.Errorf("the error names the version needed: %v", err)
	}
	if err := MySQL.CheckVersion("10.5.23-MariaDB"); err == nil || !strings.Contains(err.Error(), "MariaDB 10.5.23 is older than 10.6") {
		t.Errorf("the error names MariaDB and the version it needs: %v", err)
	}
	if MySQL.MinVersion() != "8.0 (MariaDB 10.6)" {
		t.Errorf("MySQL.MinVersion = %q", MySQL.MinVersion())
	}
	if Postgres.MinVersion() != "12.0" || SQLite.MinVersion() != "3.35" || Unknown.MinVersion() != "" {
		t.Errorf("MinVersion: %q %q %q", Postgres.MinVersion(), SQLite.MinVersion(), Unknown.MinVersion())
	}
}
