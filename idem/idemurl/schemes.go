package idemurl

import (
	"context"
	"database/sql"
	"net/url"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/backendurl"
)

// mem://: in-process. The URL takes nothing else; each Open is a separate
// key space.
func openMem(_ context.Context, _ string, u *url.URL) (Store, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" {
		return nil, invalidf("mem:// takes no host, path or parameters")
	}
	return memStore{memstore.New()}, nil
}

type memStore struct{ *memstore.Store }

func (memStore) Ping(context.Context) error { return nil }
func (memStore) Close() error               { return nil }

// sqlite:///abs/path or sqlite:rel/path. Query parameters are passed to the
// driver after ours (busy timeout, WAL, synchronous=NORMAL). The store runs
// on one connection (see backendurl.SQLiteDB).
func openSQLite(ctx context.Context, _ string, u *url.URL) (Store, error) {
	db, err := backendurl.SQLiteDB(ctx, u, idem.ErrInvalid)
	if err != nil {
		return nil, err
	}
	return openSQL(ctx, db, sqlstore.SQLite)
}

// mysql://user:pass@host:3306/db?params: MySQL or MariaDB through
// go-sql-driver/mysql (see backendurl.MySQLDSN for the parameters).
func openMySQL(ctx context.Context, _ string, u *url.URL) (Store, error) {
	db, err := backendurl.MySQLDB(u, idem.ErrInvalid)
	if err != nil {
		return nil, err
	}
	return openSQL(ctx, db, sqlstore.MySQL)
}

// postgres:// and postgresql://: everything in the URL is pgx's (TLS,
// timeouts, pool_max_conns), see pgxpool.ParseConfig. The store runs on a
// pgx pool, which keeps its connections open between requests (database/sql
// keeps two idle ones unless told otherwise).
func openPostgres(ctx context.Context, raw string, _ *url.URL) (Store, error) {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	st, err := sqlstore.NewPgx(pool)
	if err == nil {
		err = st.Migrate(ctx) // the first round trip
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &pgxStore{Store: st, pool: pool}, nil
}

// pgxStore owns the pgx pool it was opened with.
type pgxStore struct {
	*sqlstore.Store
	pool *pgxpool.Pool
}

func (s *pgxStore) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }
func (s *pgxStore) Close() error                   { s.pool.Close(); return nil }

// openSQL makes the store on db, which it then owns, and creates its tables.
func openSQL(ctx context.Context, db *sql.DB, d sqlstore.Dialect) (Store, error) {
	st, err := sqlstore.New(db, sqlstore.WithDialect(d))
	if err != nil {
		return nil, closeOnError(db, err)
	}
	if err := st.Migrate(ctx); err != nil { // the first round trip
		return nil, closeOnError(db, err)
	}
	return &sqlStore{Store: st, db: db}, nil
}

// sqlStore owns the *sql.DB it was opened with.
type sqlStore struct {
	*sqlstore.Store
	db *sql.DB
}

func (s *sqlStore) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }
func (s *sqlStore) Close() error                   { return s.db.Close() }

var (
	_ Store = memStore{}
	_ Store = (*sqlStore)(nil)
	_ Store = (*pgxStore)(nil)
)
