// Package pgxoutbox runs package outbox on pgx, PostgreSQL without
// database/sql. It is apart from outbox so that outbox imports only the
// standard library and database/sql.
//
// Make the outbox on a pool with New; write messages inside your own pgx.Tx
// with Add, so that they commit or roll back with your other writes:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'PAID' WHERE id = $1`, id); err != nil {
//			return err
//		}
//		_, err := pgxoutbox.Add(ctx, ob, tx, outbox.Message{Topic: "orders.paid", Key: id, Payload: body})
//		return err
//	})
//
// The relay, Stats and Migrate are the outbox's own.
package pgxoutbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/outbox"
)

// Tx is what Add writes through: a pgx.Tx, or a *pgxpool.Conn or *pgx.Conn
// inside a transaction.
type Tx = pgxconn.Handle

// New returns the outbox on pool. opts are outbox's; the dialect is
// PostgreSQL. It fails with outbox.ErrInvalid for a nil pool or a bad
// option, and does not touch the database: call Migrate.
func New(pool *pgxpool.Pool, opts ...outbox.Option) (*outbox.Outbox, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgxoutbox: nil *pgxpool.Pool", outbox.ErrInvalid)
	}
	opts = append(append([]outbox.Option(nil), opts...), outbox.WithDialect(outbox.Postgres))
	return outbox.NewOn(pgxconn.Pool(pool), opts...)
}

// Add is outbox.Outbox.Add inside tx, your pgx transaction: the messages
// commit or roll back with it.
func Add(ctx context.Context, o *outbox.Outbox, tx Tx, msgs ...outbox.Message) ([]string, error) {
	if o == nil || tx == nil {
		return nil, fmt.Errorf("%w: pgxoutbox: nil outbox or transaction", outbox.ErrInvalid)
	}
	return o.AddOn(ctx, pgxconn.New(tx), msgs...)
}
