package sqlinbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// PgxTxHandler processes one message inside a PgxInbox's transaction. Every
// business write must go through tx; a nil error commits them together with
// the message's id, any other error rolls both back.
type PgxTxHandler func(ctx context.Context, tx pgx.Tx, m dedup.Message) error

// PgxInbox is an Inbox on a pgx pool, for PostgreSQL without database/sql:
// the same table, statements and outcomes, with pgx.Tx where Inbox has
// *sql.Tx. It is safe for concurrent use and holds no goroutines.
type PgxInbox struct {
	inbox
	pool   *pgxpool.Pool
	txOpts pgx.TxOptions // WithTxOptions', mapped onto pgx's
}

// PgxDB is what PgxInbox.Claim runs its statement on: a pgx.Tx (the
// caller's transaction), a *pgxpool.Conn or a *pgx.Conn inside one.
type PgxDB = pgxconn.Handle

// NewPgx returns an inbox on a pgx pool. The options are New's. It fails
// with dedup.ErrInvalid when pool is nil, the table name is not a plain
// identifier, a duration is out of range or WithTxOptions asks for an
// isolation level PostgreSQL does not have. It does not touch the database;
// call Migrate to create the table.
func NewPgx(pool *pgxpool.Pool, opts ...Option) (*PgxInbox, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", dedup.ErrInvalid)
	}
	core, err := newInbox(pgxconn.Pool(pool), sqldialect.Postgres, opts)
	if err != nil {
		return nil, err
	}
	txOpts, err := pgxconn.TxOptions(core.txOpts)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlinbox: %w", dedup.ErrInvalid, err)
	}
	return &PgxInbox{inbox: core, pool: pool, txOpts: txOpts}, nil
}

// Migrate is Inbox.Migrate.
func (in *PgxInbox) Migrate(ctx context.Context) error { return in.migrate(ctx) }

// Claim inserts id into the inbox inside tx, your pgx transaction, and
// reports whether it is new; the row commits or rolls back with tx. The rest
// is Inbox.Claim: false means skip the business writes; a serialization
// failure or deadlock (SQLSTATE 40001, 40P01) is an error wrapping ErrRetry.
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		fresh, err := inbox.Claim(ctx, tx, m.ID)
//		if err != nil || !fresh {
//			return err
//		}
//		_, err = tx.Exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, amount, id)
//		return err
//	})
func (in *PgxInbox) Claim(ctx context.Context, tx PgxDB, id string) (bool, error) {
	return in.claim(ctx, pgxconn.New(tx).Exec, id)
}

// Wrap is Inbox.Wrap for a PgxTxHandler.
func (in *PgxInbox) Wrap(h PgxTxHandler) dedup.Handler {
	return func(ctx context.Context, m dedup.Message) error {
		_, err := in.Process(ctx, m, h)
		return err
	}
}

// Process is Inbox.Process in a pgx transaction begun on the pool with
// WithTxOptions' options: the same outcomes, and a panic in h rolls back and
// goes on.
func (in *PgxInbox) Process(ctx context.Context, m dedup.Message, h PgxTxHandler) (dedup.Outcome, error) {
	if h == nil {
		return in.observed(ctx, nilHandler)
	}
	return in.observed(ctx, func(ctx context.Context) (dedup.Outcome, error) {
		return in.process(ctx, m, func(ctx context.Context) (sqlconn.Tx, func() error, error) {
			tx, err := in.pool.BeginTx(ctx, in.txOpts)
			if err != nil {
				return nil, nil, err
			}
			return pgxconn.Tx(tx), func() error { return h(ctx, tx, m) }, nil
		})
	})
}

// Purge is Inbox.Purge.
func (in *PgxInbox) Purge(ctx context.Context) (int64, error) { return in.purge(ctx) }

// Lookup is Inbox.Lookup.
func (in *PgxInbox) Lookup(ctx context.Context, id string) (dedup.Mark, error) {
	return in.lookup(ctx, id)
}

// Forget is Inbox.Forget.
func (in *PgxInbox) Forget(ctx context.Context, id string, force bool) error {
	return in.forget(ctx, id)
}
