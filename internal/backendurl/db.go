package backendurl

import (
	"context"
	"database/sql"
	"net/url"
)

// SQLiteDB opens the SQLite file a sqlite:// URL names, the URL's query
// parameters passed to the driver after SQLiteDSN's, and waits until it
// answers (SQLiteReady). A URL naming no file is refused with an error
// wrapping invalid (see Invalidf). The caller registers the "sqlite" driver.
//
// The pool has one connection. SQLite's writers take turns on a file lock
// whose busy handler sleeps rather than queues, and is not fair: a
// process's own connections competing for it wait far longer than taking
// turns in the pool (at 16 concurrent idempotency claims, p50 went from 45
// ms to a few), and could starve its lock renewals (see sqllock).
func SQLiteDB(ctx context.Context, u *url.URL, invalid error) (*sql.DB, error) {
	path, err := SQLitePath(u)
	if err != nil {
		return nil, Invalidf(invalid, "%w", err)
	}
	dsn := SQLiteDSN(path)
	if u.RawQuery != "" {
		dsn += "&" + u.RawQuery
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, Invalidf(invalid, "%w", err)
	}
	db.SetMaxOpenConns(1)
	if err := SQLiteReady(ctx, db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// MySQLDB opens the database a mysql:// URL names (see MySQLDSN for the
// parameters), without connecting to it. A URL it cannot read is refused
// with an error wrapping invalid. The caller registers the "mysql" driver.
func MySQLDB(u *url.URL, invalid error) (*sql.DB, error) {
	dsn, err := MySQLDSN(u)
	if err != nil {
		return nil, Invalidf(invalid, "%w", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, Invalidf(invalid, "%w", err)
	}
	return db, nil
}
