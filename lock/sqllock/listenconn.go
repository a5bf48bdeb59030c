package sqllock

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A connSource lends the listener a connection of its own for as long as f
// runs; the connection has LISTENed, so it never goes back to its pool.
type connSource func(ctx context.Context, f func(c *pgx.Conn) error) error

// poolConns lends connections of a pgx pool, taken out of it for good.
func poolConns(pool *pgxpool.Pool) connSource {
	return func(ctx context.Context, f func(c *pgx.Conn) error) error {
		pc, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		c := pc.Hijack()
		defer func() { _ = c.Close(context.Background()) }()
		return f(c)
	}
}

// pgxConner is what pgx's database/sql driver (pgx/v5/stdlib) lends as a
// connection: it gives the pgx connection underneath.
type pgxConner interface{ Conn() *pgx.Conn }

// stdConns lends connections of their own, opened with the settings of the
// connections of a database/sql pool for PostgreSQL, or returns nil when the
// pool's driver is not pgx's (lib/pq has no way to wait for a notification
// through database/sql). The connections are apart from the pool, as
// poolConns' are from theirs: a wait never takes one of the pool's, which a
// small pool could not spare.
func stdConns(ctx context.Context, db *sql.DB) connSource {
	cfg := pgxConfigOf(ctx, db)
	if cfg == nil {
		return nil
	}
	return func(ctx context.Context, f func(c *pgx.Conn) error) error {
		own := cfg.Copy()
		// The copy's notification handler is the pool connection's, which
		// would take our notifications; nil lets pgx install its own.
		own.OnNotification = nil
		c, err := pgx.ConnectConfig(ctx, own)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close(context.Background()) }()
		return f(c)
	}
}

// pgxConfigOf returns the settings of db's connections if its driver is
// pgx's, else nil. The connection it asks goes back to the pool.
func pgxConfigOf(ctx context.Context, db *sql.DB) (cfg *pgx.ConnConfig) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	_ = conn.Raw(func(dc any) error {
		if c := pgxConnOf(dc); c != nil {
			cfg = c.Config()
		}
		return nil
	})
	return cfg
}

// pgxConnOf returns the pgx connection under a database/sql driver's
// connection, or nil.
func pgxConnOf(dc any) *pgx.Conn {
	if pc, ok := dc.(pgxConner); ok {
		return pc.Conn()
	}
	return nil
}
