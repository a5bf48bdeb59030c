package main

import (
	"context"
	"database/sql"
	"fmt"
)

// schema is the service's own tables. The idempotency records and the
// consumer's inbox belong to idem/sqlstore and dedup/sqlinbox, which create
// theirs.
//
// accounts.fence_token is the highest lock token that wrote the row (see
// fence/sqlfence); orders.status is the state machine UNPAID -> PAID | FAILED;
// ledger's unique index on payment_id is the last gate: whatever the layers in
// front of it let through, one payment is written once. idem_key is the
// Idempotency-Key of the request that made the payment, so that the same
// request, retried after its answer was lost, is answered as the payment's
// maker rather than as a stranger to it. published_at makes the
// ledger its own outbox: a row whose event was not confirmed published is sent
// again by the relay.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS accounts (
	id          TEXT        PRIMARY KEY,
	balance     BIGINT      NOT NULL CHECK (balance >= 0),
	fence_token BIGINT      NOT NULL DEFAULT 0,
	updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
)`,
	`CREATE TABLE IF NOT EXISTS orders (
	id         TEXT        PRIMARY KEY,
	account    TEXT        NOT NULL REFERENCES accounts (id),
	amount     BIGINT      NOT NULL CHECK (amount > 0),
	status     TEXT        NOT NULL DEFAULT 'UNPAID' CHECK (status IN ('UNPAID', 'PAID', 'FAILED')),
	updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`,
	`CREATE TABLE IF NOT EXISTS ledger (
	seq           BIGSERIAL   PRIMARY KEY,
	payment_id    TEXT        NOT NULL,
	order_id      TEXT        NOT NULL,
	account       TEXT        NOT NULL,
	amount        BIGINT      NOT NULL,
	balance_after BIGINT      NOT NULL,
	instance      TEXT        NOT NULL,
	idem_key      TEXT,
	created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
	published_at  TIMESTAMPTZ
)`,
	// A ledger made before idem_key: the rows it holds have none.
	`ALTER TABLE ledger ADD COLUMN IF NOT EXISTS idem_key TEXT`,
	`CREATE UNIQUE INDEX IF NOT EXISTS ledger_payment_id ON ledger (payment_id)`,
	`CREATE INDEX IF NOT EXISTS ledger_unpublished ON ledger (created_at) WHERE published_at IS NULL`,
	`CREATE TABLE IF NOT EXISTS receipts (
	account TEXT   PRIMARY KEY,
	count   BIGINT NOT NULL,
	total   BIGINT NOT NULL
)`,
}

// migrateLockID is the advisory lock that lets two instances starting
// together run the migration one after the other: concurrent CREATE TABLE IF
// NOT EXISTS of one table can fail in PostgreSQL's catalog.
const migrateLockID = 0x6c6b_7061_7901

// migrate creates the service's tables if they do not exist.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockID)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
