package sqllock

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var _ driver.Relabeler = (*backend)(nil)

// Relabel implements driver.Relabeler: one UPDATE replaces the owner if it is
// still ours and unexpired, keeping the expiry; on PostgreSQL it notifies
// the release channel too, so LISTENing watchers (an election's observers)
// read the change.
func (b *backend) Relabel(ctx context.Context, key, owner, newOwner string) error {
	var ok bool
	switch b.dialect {
	case Postgres:
		var one any
		var err error
		if ok, err = sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.relabel, key, owner, newOwner, keyHash(key)), &one); err != nil {
			return fmt.Errorf("sqllock: %w", err)
		}
	case MySQL:
		n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.relabel, newOwner, key, owner))
		if err != nil {
			return fmt.Errorf("sqllock: %w", err)
		}
		ok = n > 0
	default:
		n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.relabel, key, owner, newOwner))
		if err != nil {
			return fmt.Errorf("sqllock: %w", err)
		}
		ok = n > 0
	}
	if !ok {
		return errNotHeld
	}
	return nil
}
