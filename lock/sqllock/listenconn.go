package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

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

// minStdConns is the fewest connections a database/sql pool must allow
// (db.SetMaxOpenConns; 0, no limit, is the default) for a Locker to keep one
// to LISTEN on: with fewer, waiters poll instead, so that the listener
// never takes a large part of a small pool from the statements.
const minStdConns = 4

// stdConns lends connections of a database/sql pool for PostgreSQL, or
// returns nil when the driver is not pgx's (lib/pq has no way to wait for a
// notification through database/sql) or the pool allows fewer than
// minStdConns connections. A connection lent stays checked out of the pool
// while the listener runs and is then closed, not put back.
func stdConns(ctx context.Context, db *sql.DB) connSource {
	if n := db.Stats().MaxOpenConnections; n > 0 && n < minStdConns {
		return nil
	}
	src := func(ctx context.Context, f func(c *pgx.Conn) error) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		var ferr error
		err = conn.Raw(func(dc any) error {
			c := pgxConnOf(dc)
			if c == nil {
				return errNotPgx
			}
			ferr = f(c)
			return driver.ErrBadConn // closes the connection: it has LISTENed
		})
		if ferr != nil || errors.Is(err, driver.ErrBadConn) {
			return ferr
		}
		return err
	}
	if !lendsPgx(ctx, db) {
		return nil
	}
	return src
}

// lendsPgx reports whether db's driver lends pgx connections.
func lendsPgx(ctx context.Context, db *sql.DB) (ok bool) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	_ = conn.Raw(func(dc any) error {
		ok = pgxConnOf(dc) != nil
		return nil
	})
	return ok
}

// pgxConnOf returns the pgx connection under a database/sql driver's
// connection, or nil.
func pgxConnOf(dc any) *pgx.Conn {
	if pc, ok := dc.(pgxConner); ok {
		return pc.Conn()
	}
	return nil
}

// errNotPgx is stdConns' answer for a driver other than pgx's.
var errNotPgx = errors.New("not pgx's database/sql driver")
