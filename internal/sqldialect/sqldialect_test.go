package sqldialect

import "testing"

func TestFromDriverType(t *testing.T) {
	for name, want := range map[string]Dialect{
		"*stdlib.Driver":        Postgres,
		"*pq.Driver":            Postgres,
		"*sqlite.Driver":        SQLite,
		"*sqlite3.SQLiteDriver": SQLite,
		"*mysql.MySQLDriver":    Unknown,
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
}
