package lockurl

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
)

// conns is what a Locker or Client of this package was opened on, closed
// after it, once: a second Close returns the first one's result.
type conns struct {
	closeConn func() error // nil: nothing of the opener's to close
	once      sync.Once
	err       error // Close's result; written once
}

// close calls first (the Locker's or Client's own Close), then closes the
// connections, and returns both errors.
func (c *conns) close(first func() error) error {
	c.once.Do(func() {
		c.err = first()
		if c.closeConn != nil {
			c.err = errors.Join(c.err, c.closeConn())
		}
	})
	return c.err
}

// owning returns what opened makes of v, made on the connections closeConn
// closes; if err says v could not be made, it closes them at once and
// returns err.
func owning[V, T any](v V, err error, closeConn func() error, opened func(V, func() error) T) (T, error) {
	if err != nil {
		_ = closeConn()
		return none[T](err)
	}
	return opened(v, closeConn), nil
}

// none returns T's zero value and err, for an opener that failed.
func none[T any](err error) (T, error) {
	var zero T
	return zero, err
}

// pgxPool opens the pool a postgres:// or postgresql:// URL names:
// everything in the URL is pgx's (pool size, TLS, timeouts), see
// pgxpool.ParseConfig. Close it with closer(pool).
func pgxPool(ctx context.Context, raw string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// closer is pool.Close as a Close that returns an error.
func closer(pool *pgxpool.Pool) func() error { return func() error { pool.Close(); return nil } }

// mysqlDB opens the database a mysql:// URL names (see
// backendurl.MySQLDSN for the parameters).
func mysqlDB(u *url.URL) (*sql.DB, error) { return backendurl.MySQLDB(u, lock.ErrInvalid) }
