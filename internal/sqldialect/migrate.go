package sqldialect

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
)

// Migrate checks the server's version (see Check), then runs stmts, each
// idempotent (CREATE ... IF NOT EXISTS), in one transaction. On PostgreSQL
// the transaction first takes an advisory lock on name, since two concurrent
// CREATE TABLE IF NOT EXISTS of one table can collide there; SQLite's single
// writer serialises them already. MySQL commits each DDL statement by itself
// and serialises concurrent ones on the table's metadata lock, so there the
// statements simply run one after the other.
func (d Dialect) Migrate(ctx context.Context, db sqlconn.DB, name string, stmts []string, invalid error) error {
	if err := d.Check(ctx, db, invalid); err != nil {
		return err
	}
	if d == MySQL {
		for _, m := range stmts {
			if _, err := db.Exec(ctx, m); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		return nil
	}
	return sqlconn.InTx(ctx, db, nil, func(tx sqlconn.Tx) error {
		if d == Postgres {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, name); err != nil {
				return err
			}
		}
		for _, m := range stmts {
			if _, err := tx.Exec(ctx, m); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		return nil
	})
}
