package sqlfence

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
)

// PgxDB is what a Guard runs its statements on through pgx: a pgx.Tx, a
// *pgxpool.Pool, a *pgxpool.Conn and a *pgx.Conn all satisfy it.
type PgxDB = pgxconn.Handle

// NewPgx returns a Guard for table on a pgx pool, for PostgreSQL without
// database/sql. It touches no server. Each statement outside a transaction
// runs on its own pooled connection and commits by itself; for a
// read-modify-write, run the Guard in your transaction with [Guard.InPgx].
// The options are New's; WithDialect may only say Postgres. Errors wrap
// fence.ErrInvalid: a nil pool, another dialect, a name that is not a plain
// identifier.
func NewPgx(pool *pgxpool.Pool, table string, opts ...Option) (*Guard, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sqlfence: nil *pgxpool.Pool", fence.ErrInvalid)
	}
	return newGuard(pgxconn.New(pool), table, opts, pgxconn.Dialect)
}

// InPgx returns a copy of g that runs its statements on db, typically the
// pgx.Tx of your transaction: the claim, the read and the guarded write then
// commit or roll back with your other statements, and the claimed row stays
// locked until you commit. It is [Guard.In] for pgx; g may come from New or
// NewPgx, and must be of the same PostgreSQL database:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		acct := accounts.InPgx(tx)
//		if err := acct.Read(ctx, lease, "acct-1", sqlfence.Into{"balance": &balance}); err != nil {
//			return err // fence.ErrStale: a newer holder got there; nothing changed
//		}
//		return acct.Update(ctx, lease, "acct-1", sqlfence.Values{"balance": balance - 300})
//	})
//
// A serialization failure or deadlock (SQLSTATE 40001, 40P01) is an error
// wrapping [ErrRetry]: run the whole transaction again.
func (g *Guard) InPgx(db PgxDB) *Guard {
	c := g.on(pgxconn.New(db))
	c.dialect = Postgres
	return c
}
