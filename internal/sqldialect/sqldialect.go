// Package sqldialect holds what the SQL packages (lock/sqllock,
// idem/sqlstore, fence/sqlfence, state, dedup/sqlinbox) share about SQL
// dialects, starting with the Dialect type itself, which each of them
// re-exports under its own name: telling PostgreSQL from SQLite by a database/sql driver's type,
// without importing any driver; rewriting $N placeholders for SQLite; and
// checking identifiers that are spliced into statements.
package sqldialect

import (
	"database/sql"
	"fmt"
	"regexp"
	"strings"
)

// Dialect is a SQL flavour.
type Dialect int

// The dialects. Unknown is the zero value: not given, or not detected. The
// packages that take a dialect call it Detect: "find out from the driver".
const (
	Unknown Dialect = iota
	Postgres
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return "detect"
}

// Detect tells the dialect of db from its driver's Go type name: pgx's
// stdlib driver and lib/pq mean Postgres, a type mentioning sqlite means
// SQLite; anything else is Unknown.
func Detect(db *sql.DB) Dialect {
	return FromDriverType(fmt.Sprintf("%T", db.Driver()))
}

// FromDriverType is Detect on a driver's type name, such as "*stdlib.Driver".
func FromDriverType(name string) Dialect {
	t := strings.ToLower(name)
	switch {
	case strings.Contains(t, "sqlite"):
		return SQLite
	case strings.Contains(t, "stdlib.driver"), strings.Contains(t, "pq.driver"), strings.Contains(t, "pgx"):
		return Postgres
	}
	return Unknown
}

var dollar = regexp.MustCompile(`\$(\d+)`)

// Rebind rewrites a statement written with $N placeholders for d: SQLite
// gets ?N (same numbering, so a parameter may be used twice).
func (d Dialect) Rebind(q string) string {
	if d == SQLite {
		return dollar.ReplaceAllString(q, "?$1")
	}
	return q
}

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	tableRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// Ident reports an error unless name is a plain SQL identifier: a letter or
// underscore, then letters, digits, underscores, at most 63 bytes. Such
// names are safe to splice into statements unquoted.
func Ident(what, name string) error {
	if !identRe.MatchString(name) {
		return fmt.Errorf("%s %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes)", what, name)
	}
	return nil
}

// Table is Ident for a table name, which may carry one schema qualifier
// ("billing.orders").
func Table(name string) error {
	if !tableRe.MatchString(name) {
		return fmt.Errorf("table %q is not a plain identifier, optionally schema-qualified", name)
	}
	return nil
}

// Bare returns a table name without its schema qualifier, which is how a
// statement refers to the target table's columns.
func Bare(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[i+1:]
	}
	return table
}
