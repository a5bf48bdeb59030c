// Package pgxconn makes pgx's handles (a *pgxpool.Pool, a pgx.Tx, a
// *pgxpool.Conn, a *pgx.Conn) into sqlconn's, so latchkey's SQL packages run
// on pgx without database/sql. It is imported by the backend packages that
// already import pgx, and by state/pgxstate; never by a core package.
package pgxconn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Handle is what pgx's handles share: pgx.Tx, *pgxpool.Pool,
// *pgxpool.Conn and *pgx.Conn all satisfy it.
type Handle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ Handle = (pgx.Tx)(nil)
	_ Handle = (*pgxpool.Pool)(nil)
	_ Handle = (*pgxpool.Conn)(nil)
	_ Handle = (*pgx.Conn)(nil)

	_ sqlconn.DB = pool{}
	_ sqlconn.Tx = tx{}
)

// New returns h as a sqlconn.Querier. A pgx.Tx stays the caller's: the
// statements run in it, and commit or roll back with it.
func New(h Handle) sqlconn.Querier { return conn{h} }

// Pool returns p as a sqlconn.DB.
func Pool(p *pgxpool.Pool) sqlconn.DB { return pool{conn{p}, p} }

type conn struct{ h Handle }

func (c conn) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	tag, err := c.h.Exec(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return result(tag.RowsAffected()), nil
}

func (c conn) QueryRow(ctx context.Context, q string, args ...any) sqlconn.Row {
	return c.h.QueryRow(ctx, q, args...) // pgx.ErrNoRows wraps sql.ErrNoRows
}

func (c conn) Query(ctx context.Context, q string, args ...any) (sqlconn.Rows, error) {
	r, err := c.h.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

// result is a statement's affected rows. PostgreSQL has no LAST_INSERT_ID;
// a value comes back with RETURNING.
type result int64

func (r result) RowsAffected() (int64, error) { return int64(r), nil }
func (r result) LastInsertId() (int64, error) {
	return 0, errors.New("pgx: PostgreSQL has no LastInsertId; use RETURNING")
}

type rows struct{ pgx.Rows }

func (r rows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

type pool struct {
	conn
	p *pgxpool.Pool
}

func (p pool) Begin(ctx context.Context, opts *sql.TxOptions) (sqlconn.Tx, error) {
	o, err := TxOptions(opts)
	if err != nil {
		return nil, err
	}
	t, err := p.p.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return Tx(t), nil
}

// Tx returns t as a sqlconn.Tx.
func Tx(t pgx.Tx) sqlconn.Tx { return tx{conn{t}, t} }

type tx struct {
	conn
	t pgx.Tx
}

func (t tx) Commit(ctx context.Context) error   { return t.t.Commit(ctx) }
func (t tx) Rollback(ctx context.Context) error { return t.t.Rollback(ctx) }

// TxOptions maps database/sql's transaction options onto pgx's.
func TxOptions(o *sql.TxOptions) (pgx.TxOptions, error) {
	var p pgx.TxOptions
	if o == nil {
		return p, nil
	}
	if o.ReadOnly {
		p.AccessMode = pgx.ReadOnly
	}
	switch o.Isolation {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		p.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		p.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		p.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		p.IsoLevel = pgx.Serializable
	default:
		return p, fmt.Errorf("pgx: isolation level %v is not PostgreSQL's", o.Isolation)
	}
	return p, nil
}

// Dialect settles the dialect of a package's pgx handle from the one its
// caller gave (Unknown: not given): PostgreSQL, the only one pgx speaks.
func Dialect(d sqldialect.Dialect) (sqldialect.Dialect, error) {
	if d != sqldialect.Unknown && d != sqldialect.Postgres {
		return d, fmt.Errorf("pgx speaks PostgreSQL, not %v", d)
	}
	return sqldialect.Postgres, nil
}
