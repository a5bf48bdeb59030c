package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// The demo's business data: what a lock is there to protect. It lives in the
// SQLite file (--db), in tables apart from the lock's own; rows are named
// per run, so a reused file never mixes runs.
var dataSchema = []string{
	`CREATE TABLE IF NOT EXISTS demo_counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS demo_stock (item TEXT PRIMARY KEY, qty INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS demo_sales (id INTEGER PRIMARY KEY AUTOINCREMENT, item TEXT NOT NULL, buyer INTEGER NOT NULL)`,
	// A lock without a lease, the way the seeds' "forgot to unlock" story
	// starts: a row that only its holder deletes.
	`CREATE TABLE IF NOT EXISTS demo_naive_locks (name TEXT PRIMARY KEY, holder INTEGER NOT NULL)`,
}

// openData opens the data file with up to conns connections.
func openData(ctx context.Context, path string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", lockurl.SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

func createData(ctx context.Context, db *sql.DB) error {
	for _, q := range dataSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the demo's tables: %w", err)
		}
	}
	return nil
}

func readCounter(ctx context.Context, db *sql.DB, name string) (int64, error) {
	var v int64
	err := db.QueryRowContext(ctx, `SELECT value FROM demo_counter WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func writeCounter(ctx context.Context, db *sql.DB, name string, v int64) error {
	_, err := db.ExecContext(ctx, `INSERT INTO demo_counter (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, v)
	return err
}

// takeNaiveLock inserts the lease-less lock row; false if someone has it.
func takeNaiveLock(ctx context.Context, db *sql.DB, name string, holder int) (bool, error) {
	res, err := db.ExecContext(ctx, `INSERT INTO demo_naive_locks (name, holder) VALUES (?, ?)
		ON CONFLICT (name) DO NOTHING`, name, holder)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
