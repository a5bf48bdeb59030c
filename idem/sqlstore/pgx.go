package sqlstore

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
)

// NewPgx returns a store on a pgx pool, for PostgreSQL without database/sql:
// the same statements, one round trip each, with RETURNING where
// database/sql's MySQL path reads LAST_INSERT_ID. The options are New's;
// WithDialect may only say Postgres. It fails with idem.ErrInvalid on a nil
// pool, another dialect or a bad table name, and does not touch the
// database; call Migrate to create the tables.
func NewPgx(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", idem.ErrInvalid)
	}
	return newStore(pgxconn.Pool(pool), opts, pgxconn.Dialect)
}
