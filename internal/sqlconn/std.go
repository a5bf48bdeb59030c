package sqlconn

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// StdHandle is what database/sql's handles share, and all that a statement
// of fence/sqlfence or state needs: *sql.DB, *sql.Tx and *sql.Conn all
// satisfy it. Query also needs QueryContext, which they have too.
type StdHandle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stdQuerier is a StdHandle that reads many rows.
type stdQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var (
	_ StdHandle = (*sql.DB)(nil)
	_ StdHandle = (*sql.Tx)(nil)
	_ StdHandle = (*sql.Conn)(nil)
)

// Std returns h as a Querier.
func Std(h StdHandle) Querier { return std{h} }

// StdDB returns db as a DB.
func StdDB(db *sql.DB) DB { return stdDB{std{db}, db} }

type std struct{ h StdHandle }

func (s std) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return s.h.ExecContext(ctx, q, args...)
}

func (s std) QueryRow(ctx context.Context, q string, args ...any) Row {
	return s.h.QueryRowContext(ctx, q, args...)
}

func (s std) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	h, ok := s.h.(stdQuerier)
	if !ok {
		return nil, fmt.Errorf("sqlconn: %T has no QueryContext", s.h)
	}
	rows, err := h.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

type stdDB struct {
	std
	db *sql.DB
}

func (s stdDB) Begin(ctx context.Context, opts *sql.TxOptions) (Tx, error) {
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return StdTx(tx), nil
}

// StdTx returns tx as a Tx.
func StdTx(tx *sql.Tx) Tx { return stdTx{std{tx}, tx} }

// stdTx ignores the contexts of Commit and Rollback: a *sql.Tx ends on the
// context BeginTx was given.
type stdTx struct {
	std
	tx *sql.Tx
}

func (t stdTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t stdTx) Rollback(context.Context) error { return t.tx.Rollback() }

// rollbackWait bounds a rollback after the caller's context is done.
const rollbackWait = 5 * time.Second

// Rollback rolls tx back on a context that ctx's cancellation does not
// reach, bounded, so that a transaction whose context timed out still ends
// on the server at once. After a commit it does nothing.
func Rollback(ctx context.Context, tx Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackWait)
	defer cancel()
	_ = tx.Rollback(ctx)
}
