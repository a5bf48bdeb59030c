package lockurl

import (
	"context"
	"database/sql"
	"net/url"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// mem://: in-process. The URL takes nothing else; each Open is a separate
// lock space.
func openMem(_ context.Context, _ string, u *url.URL) (Locker, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return nil, invalidf("mem:// takes no host or path")
	}
	return memLocker{memlock.New()}, nil
}

type memLocker struct{ *memlock.Locker }

func (memLocker) Close() error { return nil }

// sqliteOpener opens what newFn (sqllock.New, NewRW, NewSemaphores) makes
// on the file of a sqlite:///abs/path or sqlite:rel/path URL, made into a T
// by on. Query parameters are passed to the driver after ours (busy timeout,
// WAL, synchronous=NORMAL).
func sqliteOpener[V, T any](newFn func(context.Context, *sql.DB, sqllock.Dialect, ...sqllock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, _ string, u *url.URL) (T, error) {
		db, err := sqliteDB(ctx, u)
		if err != nil {
			return none[T](err)
		}
		v, err := newFn(ctx, db, sqllock.SQLite)
		return owning(v, err, db.Close, on)
	}
}

// sqliteDB opens the file a sqlite URL names, on one connection (see
// backendurl.SQLiteDB).
func sqliteDB(ctx context.Context, u *url.URL) (*sql.DB, error) {
	return backendurl.SQLiteDB(ctx, u, lock.ErrInvalid)
}

// postgresOpener opens what newFn (sqllock.NewPgx, NewPgxRW,
// NewPgxSemaphores) makes, creating its table in the first round trip, on
// the pool of a postgres:// or postgresql:// URL, made into a T by on.
// Everything in the URL is pgx's (pool size, TLS, timeouts), see
// pgxpool.ParseConfig.
func postgresOpener[V, T any](newFn func(context.Context, *pgxpool.Pool, ...sqllock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, raw string, _ *url.URL) (T, error) {
		pool, err := pgxPool(ctx, raw)
		if err != nil {
			return none[T](err)
		}
		v, err := newFn(ctx, pool)
		return owning(v, err, closer(pool), on)
	}
}

// mysqlOpener opens what newFn (sqllock.New, NewSemaphores) makes, creating
// its table in the first round trip, on the database of a
// mysql://user:pass@host:3306/db?params URL, made into a T by on: MySQL or
// MariaDB through go-sql-driver/mysql (see backendurl.MySQLDSN for the
// parameters). MySQL has no NOTIFY: lock waiters of different processes
// take turns on a named lock of the server, semaphore waiters poll.
func mysqlOpener[V, T any](newFn func(context.Context, *sql.DB, sqllock.Dialect, ...sqllock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, _ string, u *url.URL) (T, error) {
		db, err := mysqlDB(u)
		if err != nil {
			return none[T](err)
		}
		v, err := newFn(ctx, db, sqllock.MySQL)
		return owning(v, err, db.Close, on)
	}
}

// sqlLocker closes the connections it was opened with after the Locker.
type sqlLocker struct {
	*sqllock.Locker
	conns
}

func (l *sqlLocker) Close() error { return l.close(l.Locker.Close) }

func sqlLockerOn(l *sqllock.Locker, closeConn func() error) Locker {
	return &sqlLocker{Locker: l, conns: conns{closeConn: closeConn}}
}

var (
	_ Locker = memLocker{}
	_ Locker = (*sqlLocker)(nil)
)
