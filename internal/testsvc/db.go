package testsvc

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DBOption adjusts a handle OpenDB opened.
type DBOption func(*sql.DB)

// MaxOpenConns sets the handle's connection limit, as sql.DB.SetMaxOpenConns
// does: 0 lifts OpenDB's one connection for SQLite.
func MaxOpenConns(n int) DBOption {
	return func(db *sql.DB) { db.SetMaxOpenConns(n) }
}

// OpenDB opens a database/sql handle on dsn through driver, failing t if it
// cannot, and closes it when t ends. A "sqlite" handle keeps one connection,
// as lock/sqllock's package doc asks of SQLite users; opts apply after that.
func OpenDB(t testing.TB, driver, dsn string, opts ...DBOption) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if driver == "sqlite" {
		db.SetMaxOpenConns(1)
	}
	for _, o := range opts {
		o(db)
	}
	return db
}

// OpenPgx opens a pgx pool on url, failing t if it cannot, and closes it
// when t ends.
func OpenPgx(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
