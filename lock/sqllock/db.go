package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conn is the little the lock needs from a database handle, so one backend
// serves database/sql and pgx alike.
type conn interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	// queryRow scans the first row into dest; ok is false if there was none.
	queryRow(ctx context.Context, q string, args []any, dest ...any) (ok bool, err error)
	// queryStrings returns the first column of every row.
	queryStrings(ctx context.Context, q string, args ...any) ([]string, error)
}

// sqlConn is a conn on a *sql.DB, or on a *sql.Tx inside a transaction.
type sqlConn struct{ db sqlDB }

// sqlDB is what *sql.DB and *sql.Tx share.
type sqlDB interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func (c sqlConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// lastID runs q and returns the LAST_INSERT_ID it left, MySQL's way of
// answering from an UPDATE (see sqldialect's package doc).
func (c sqlConn) lastID(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (c sqlConn) queryRow(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	err := c.db.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (c sqlConn) queryStrings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// pgxConn is a conn on a *pgxpool.Pool, or on a pgx.Tx inside a
// transaction.
type pgxConn struct{ pool pgxDB }

// pgxDB is what *pgxpool.Pool and pgx.Tx share.
type pgxDB interface {
	Exec(ctx context.Context, q string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, q string, args ...any) pgx.Row
	Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
}

var (
	_ sqlDB = (*sql.DB)(nil)
	_ sqlDB = (*sql.Tx)(nil)
	_ pgxDB = (*pgxpool.Pool)(nil)
	_ pgxDB = (pgx.Tx)(nil)
)

// inTx runs fn in a transaction on db (a conn New or NewPgx made) of
// dialect d, committed if fn returns nil and rolled back otherwise. On MySQL
// it is READ COMMITTED, which takes no gap locks: those would make
// transactions on neighbouring keys deadlock.
func inTx(ctx context.Context, db conn, d Dialect, fn func(tx conn) error) error {
	switch c := db.(type) {
	case sqlConn:
		var opts *sql.TxOptions
		if d == MySQL {
			opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		}
		tx, err := c.db.(*sql.DB).BeginTx(ctx, opts)
		if err != nil {
			return err
		}
		if err := fn(sqlConn{tx}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	case pgxConn:
		return pgx.BeginFunc(ctx, c.pool.(*pgxpool.Pool), func(tx pgx.Tx) error { return fn(pgxConn{tx}) })
	}
	return fmt.Errorf("sqllock: no transactions on a %T", db)
}

func (c pgxConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (c pgxConn) queryRow(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	err := c.pool.QueryRow(ctx, q, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (c pgxConn) queryStrings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := c.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
