package sqllock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
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

type sqlConn struct{ db *sql.DB }

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

type pgxConn struct{ pool *pgxpool.Pool }

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
