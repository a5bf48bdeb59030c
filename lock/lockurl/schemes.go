package lockurl

import (
	"context"
	"database/sql"
	"net/url"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

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

// sqlite:///abs/path or sqlite:rel/path. Query parameters are passed to the
// driver after ours (busy timeout, WAL, synchronous=NORMAL).
func openSQLite(ctx context.Context, _ string, u *url.URL) (Locker, error) {
	db, err := sqliteDB(ctx, u)
	if err != nil {
		return nil, err
	}
	l, err := sqllock.New(ctx, db, sqllock.SQLite)
	return owning(l, err, db.Close, sqlLockerOn)
}

// sqliteDB opens the file a sqlite URL names, on one connection (see
// backendurl.SQLiteDB).
func sqliteDB(ctx context.Context, u *url.URL) (*sql.DB, error) {
	return backendurl.SQLiteDB(ctx, u, lock.ErrInvalid)
}

// postgres:// and postgresql://: everything in the URL is pgx's (pool size,
// TLS, timeouts), see pgxpool.ParseConfig.
func openPostgres(ctx context.Context, raw string, _ *url.URL) (Locker, error) {
	pool, err := pgxPool(ctx, raw)
	if err != nil {
		return nil, err
	}
	l, err := sqllock.NewPgx(ctx, pool) // creates the table: the first round trip
	return owning(l, err, closer(pool), sqlLockerOn)
}

// mysql://user:pass@host:3306/db?params: MySQL or MariaDB through
// go-sql-driver/mysql (see backendurl.MySQLDSN for the parameters); waiters
// poll, MySQL having no NOTIFY.
func openMySQL(ctx context.Context, _ string, u *url.URL) (Locker, error) {
	db, err := mysqlDB(u)
	if err != nil {
		return nil, err
	}
	l, err := sqllock.New(ctx, db, sqllock.MySQL) // creates the table: the first round trip
	return owning(l, err, db.Close, sqlLockerOn)
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
