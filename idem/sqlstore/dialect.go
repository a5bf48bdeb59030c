package sqlstore

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Dialect is the SQL flavour of the database. It is one type across
// latchkey's SQL packages: sqllock.Postgres, sqlstore.Postgres,
// sqlfence.Postgres and state.Postgres are the same value.
type Dialect = sqldialect.Dialect

// The dialects.
const (
	// Detect picks the dialect from the *sql.DB's driver: pgx's stdlib driver
	// and lib/pq mean Postgres, a driver whose type name mentions sqlite means
	// SQLite.
	Detect = sqldialect.Unknown
	// Postgres is PostgreSQL 12 or later, through pgx's database/sql driver
	// (github.com/jackc/pgx/v5/stdlib, driver name "pgx") or lib/pq.
	Postgres = sqldialect.Postgres
	// SQLite is SQLite 3.35 or later (for RETURNING), for example
	// modernc.org/sqlite (driver name "sqlite"). Open it with WAL and a busy
	// timeout: file:PATH?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL).
	SQLite = sqldialect.SQLite
)

// nowMs is the database's clock in Unix milliseconds. SQLite's julianday is
// integral milliseconds inside, so rounding recovers them exactly.
func nowMs(d Dialect) string {
	if d == SQLite {
		return "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
	}
	return "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
}

func blob(d Dialect) string {
	if d == SQLite {
		return "BLOB"
	}
	return "BYTEA"
}

// fill fills in a query template: {t} is the records table, {tt} the tokens
// table, {now} the clock, {blob} the binary type; $N placeholders become ?N
// for SQLite.
func fill(d Dialect, q, table, tokens string) string {
	q = strings.NewReplacer("{tt}", tokens, "{t}", table, "{now}", nowMs(d), "{blob}", blob(d)).Replace(q)
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
