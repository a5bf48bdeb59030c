// Package sqlfence guards writes to rows of your own SQL tables with fencing
// tokens, on PostgreSQL and SQLite through database/sql.
//
// Add a token column to the table you protect; it holds the highest token
// applied to the row:
//
//	ALTER TABLE inventory ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0
//
// Then write through a [Guard] with the lock holder's lease. Each write is one
// statement with the fencing rule in its WHERE clause, so no writer can slip in
// between a check and a write:
//
//	UPDATE inventory SET qty = $1, fence_token = $2
//	 WHERE sku = $3 AND COALESCE(fence_token, 0) <= $2
//
//	INSERT INTO inventory (sku, qty, fence_token) VALUES ($1, $2, $3)
//	ON CONFLICT (sku) DO UPDATE SET qty = excluded.qty, fence_token = excluded.fence_token
//	 WHERE COALESCE(inventory.fence_token, 0) <= excluded.fence_token
//
// A write with a token lower than the row's changes nothing and returns an
// error wrapping [fence.ErrStale]. Use [Guard.In] to run the write inside your
// own transaction, next to your other statements.
//
// SQLite needs version 3.24 or later (upsert); open it with WAL and a busy
// timeout, as lock/sqllock's documentation describes.
package sqlfence
