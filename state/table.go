package state

import (
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// DB is what Machine and Optimistic run their statements on: *sql.DB,
// *sql.Tx and *sql.Conn all satisfy it.
type DB = sqldialect.DB

// Values are the columns a write sets, by name. Names must be plain SQL
// identifiers; values are passed as statement parameters.
type Values = sqldialect.Values

// Dialect is the SQL flavour of the database: Detect, Postgres, SQLite or
// MySQL (MySQL 8.0 and MariaDB 10.6 or later). It is one type across
// latchkey's SQL packages (state.Postgres and sqlfence.Postgres are the same
// value).
type Dialect = sqldialect.Dialect

// The dialects. Detect tells PostgreSQL (pgx's stdlib driver, lib/pq),
// SQLite (modernc.org/sqlite qualifies) and MySQL or MariaDB
// (github.com/go-sql-driver/mysql) apart by the *sql.DB's driver.
const Detect, Postgres, SQLite, MySQL = sqldialect.Unknown, sqldialect.Postgres, sqldialect.SQLite, sqldialect.MySQL

// table is what both kinds of update know about their table.
type table struct {
	db      DB
	dialect sqldialect.Dialect
	name    string
	key     string
}

// setClause renders "c1 = $n, c2 = $n+1, " for values, appending their
// values to args, in a fixed column order. reserved names may not be set.
func setClause(values Values, args []any, reserved ...string) (string, []any, error) {
	cols, err := sqldialect.Columns(values, reserved...)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s := ""
	for _, c := range cols {
		args = append(args, values[c])
		s += fmt.Sprintf("%s = $%d, ", c, len(args))
	}
	return s, args, nil
}
