package state

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// DB is what Machine and Optimistic run their statements on through
// database/sql: *sql.DB, *sql.Tx and *sql.Conn all satisfy it.
type DB = sqlconn.StdHandle

// Conn is what Machine and Optimistic run their statements on without
// database/sql: package state/pgxstate makes one of a pgx pool, connection
// or transaction (pgxstate.Conn(tx)), and any driver can be given one
// through a small adapter. Exec's result needs RowsAffected only. A Row's
// Scan returns an error wrapping sql.ErrNoRows when there is no row (pgx's
// ErrNoRows does), and a driver's error is left in the chain, so that
// deadlocks and serialization failures are told as ErrRetry (see
// [ErrRetry]).
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is the first row of a query's answer, as Conn.QueryRow returns it:
// *sql.Row and pgx.Row fit.
type Row = interface {
	Scan(dest ...any) error
}

var _ Conn = sqlconn.Querier(nil)

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
	db      Conn
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
