package sqlstore

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Dialect is the SQL flavour of the database.
type Dialect int

const (
	// Detect picks the dialect from the *sql.DB's driver: pgx's stdlib driver
	// and lib/pq mean Postgres, a driver whose type name mentions sqlite means
	// SQLite.
	Detect Dialect = iota
	// Postgres is PostgreSQL 12 or later, through pgx's database/sql driver
	// (github.com/jackc/pgx/v5/stdlib, driver name "pgx") or lib/pq.
	Postgres
	// SQLite is SQLite 3.35 or later (for RETURNING), for example
	// modernc.org/sqlite (driver name "sqlite"). Open it with WAL and a busy
	// timeout: file:PATH?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL).
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

// detect maps a driver's Go type name to a dialect without importing the
// driver.
func detect(driverType string) Dialect {
	switch sqldialect.FromDriverType(driverType) {
	case sqldialect.SQLite:
		return SQLite
	case sqldialect.Postgres:
		return Postgres
	}
	return Detect
}

// nowMs is the database's clock in Unix milliseconds. SQLite's julianday is
// integral milliseconds inside, so rounding recovers them exactly.
func (d Dialect) nowMs() string {
	if d == SQLite {
		return "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
	}
	return "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
}

func (d Dialect) blob() string {
	if d == SQLite {
		return "BLOB"
	}
	return "BYTEA"
}

// sql fills in a query template: {t} is the records table, {tt} the tokens
// table, {now} the clock, {blob} the binary type; $N placeholders become ?N
// for SQLite.
func (d Dialect) sql(q, table, tokens string) string {
	q = strings.NewReplacer("{tt}", tokens, "{t}", table, "{now}", d.nowMs(), "{blob}", d.blob()).Replace(q)
	if d == SQLite {
		return sqldialect.SQLite.Rebind(q)
	}
	return q
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func checkIdent(what, name string) error {
	if !identRe.MatchString(name) {
		return fmt.Errorf("sqlstore: %s %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 48 characters)", what, name)
	}
	return nil
}
