// Package sqlconn is the one database handle latchkey's SQL packages
// (lock/sqllock, fence/sqlfence, state, idem/sqlstore, dedup/sqlinbox) run
// their statements on, whatever the driver: database/sql (*sql.DB, *sql.Tx,
// *sql.Conn, through Std and StdDB) or pgx without database/sql (package
// pgxconn: a *pgxpool.Pool, a pgx.Tx, a *pgx.Conn).
//
// It imports only the standard library, so the core package state can take
// a Conn; the pgx side lives in pgxconn, which only the backend packages and
// state/pgxstate import.
//
// The answers are database/sql's on every driver: Exec returns a sql.Result
// (RowsAffected always; LastInsertId where the driver has one, that is
// MySQL's), a Row's Scan returns an error wrapping sql.ErrNoRows when there
// was no row (pgx.ErrNoRows wraps it), and a driver's own error stays in the
// chain for errors.As and for sqldialect.Retryable.
package sqlconn

import (
	"context"
	"database/sql"
	"errors"
)

// Row is the first row of a query's answer: *sql.Row and pgx.Row fit. It is
// an alias of an unnamed interface so that packages may declare the same
// type under their own name without importing this one.
type Row = interface {
	Scan(dest ...any) error
}

// Conn runs one statement at a time: on a pool, a connection or inside a
// transaction.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Rows is a query's answer, read row by row.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Querier is a Conn that also reads many rows.
type Querier interface {
	Conn
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Tx is an open transaction.
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// DB is a pool that also begins transactions.
type DB interface {
	Querier
	// Begin starts a transaction with opts (nil: the server's defaults).
	// pgx maps the isolation levels and ReadOnly onto its own options.
	Begin(ctx context.Context, opts *sql.TxOptions) (Tx, error)
}

// ScanOne scans row into dest and reports whether there was a row: no row
// is (false, nil), not an error.
func ScanOne(row Row, dest ...any) (bool, error) {
	err := row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Affected returns the rows a statement changed (or matched: see
// sqldialect's package doc for MySQL), from Exec's answer.
func Affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// LastID returns the LAST_INSERT_ID a MySQL statement left, from Exec's
// answer.
func LastID(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// AffectedAndID returns the rows a MySQL statement changed and, when it
// changed any, the LAST_INSERT_ID it left (0 otherwise), from Exec's answer.
func AffectedAndID(res sql.Result, err error) (changed, id int64, _ error) {
	if changed, err = Affected(res, err); err != nil || changed == 0 {
		return 0, 0, err
	}
	id, err = res.LastInsertId()
	return changed, id, err
}

// Strings returns the first column of every row of q's answer.
func Strings(ctx context.Context, c Querier, q string, args ...any) ([]string, error) {
	var out []string
	err := Each(ctx, c, q, args, func(scan func(...any) error) error {
		var s string
		if err := scan(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// Each calls row for every row of q's answer, with the row's Scan, and stops
// at row's first error.
func Each(ctx context.Context, c Querier, q string, args []any, row func(scan func(...any) error) error) error {
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// InTx runs fn in a transaction of db with opts and commits it when fn
// returns nil; otherwise, and when fn panics, it rolls back. The rollback
// runs on a context that ctx's cancellation does not reach, bounded, so a
// timed-out transaction still ends on the server at once.
func InTx(ctx context.Context, db DB, opts *sql.TxOptions, fn func(Tx) error) error {
	tx, err := db.Begin(ctx, opts)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			Rollback(ctx, tx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(ctx); err != nil {
		Rollback(ctx, tx) // pgx leaves a failed commit's transaction to end
		return err
	}
	return nil
}
