// Package pgxstate runs package state's Machine and Optimistic on pgx,
// PostgreSQL without database/sql. It is apart from state so that state
// imports only the standard library.
//
// Make them on a pool with NewMachine and NewOptimistic; move rows inside
// your own pgx.Tx with On and Conn, so that the move commits or rolls back
// with your other writes:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		res, err := orders.On(pgxstate.Conn(tx)).Move(ctx, id, "PAID", nil)
//		if err != nil || res == state.Duplicate {
//			return err // a duplicate callback: the order was paid already
//		}
//		_, err = tx.Exec(ctx, `INSERT INTO receipts (order_id) VALUES ($1)`, id)
//		return err
//	})
//
// A serialization failure or deadlock (SQLSTATE 40001, 40P01) and a lock
// timeout (55P03) are errors wrapping state.ErrRetry, as on database/sql.
package pgxstate

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/state"
)

// DB is a pgx handle: a pgx.Tx, a *pgxpool.Pool, a *pgxpool.Conn and a
// *pgx.Conn all satisfy it.
type DB = pgxconn.Handle

// Conn returns db as a state.Conn, for Machine.On and Optimistic.On. When db
// is a pgx.Tx, the statements run in that transaction.
func Conn(db DB) state.Conn { return pgxconn.New(db) }

// NewMachine is state.NewMachine on a pgx pool. The options are state's,
// but for WithDialect, which is ignored: pgx speaks PostgreSQL. Errors wrap
// state.ErrInvalid, as state.NewMachine's.
func NewMachine(pool *pgxpool.Pool, table string, transitions []state.Transition, opts ...state.Option) (*state.Machine, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgxstate: nil *pgxpool.Pool", state.ErrInvalid)
	}
	return state.NewMachineOn(Conn(pool), table, transitions, postgres(opts)...)
}

// NewOptimistic is state.NewOptimistic on a pgx pool. The options are
// state's, but for WithDialect, which is ignored: pgx speaks PostgreSQL.
// Errors wrap state.ErrInvalid, as state.NewOptimistic's.
func NewOptimistic(pool *pgxpool.Pool, table string, opts ...state.Option) (*state.Optimistic, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgxstate: nil *pgxpool.Pool", state.ErrInvalid)
	}
	return state.NewOptimisticOn(Conn(pool), table, postgres(opts)...)
}

// postgres appends the one dialect pgx speaks to opts, after the caller's.
func postgres(opts []state.Option) []state.Option {
	return append(append([]state.Option(nil), opts...), state.WithDialect(state.Postgres))
}
