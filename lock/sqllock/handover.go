package sqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var _ driver.HandoverReleaser = (*backend)(nil)

// ReleaseHandover implements driver.HandoverReleaser: one statement releases
// owner's lock on key and takes it for next with a new token (the rule of an
// acquisition: above the last token, at least the database clock in µs),
// unless a waiter of another Locker marked the row (see waitedMark): then
// it releases the lock for everyone and, on PostgreSQL, notifies.
func (b *backend) ReleaseHandover(ctx context.Context, key, owner, next string, ttl time.Duration) (uint64, error) {
	var (
		token int64
		ok    bool
		err   error
	)
	switch b.dialect {
	case MySQL:
		var res int64
		token, res, err = b.handoverMySQL(ctx, key, owner, next, ttl)
		ok = res > 0
	case Postgres:
		ok, err = sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.handover, key, owner, next, ttl.Milliseconds(), keyHash(key)), &token)
	default:
		ok, err = sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.handover, key, owner, next, ttl.Milliseconds()), &token)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("sqllock: %w", err)
	case !ok:
		return 0, errNotHeld
	}
	return uint64(max(token, 0)), nil
}

// handoverMySQL runs MySQL's handover: the rows it changed, and the token
// it left in LAST_INSERT_ID (0 when released for everyone).
func (b *backend) handoverMySQL(ctx context.Context, key, owner, next string, ttl time.Duration) (token, changed int64, err error) {
	if conn, name, done := b.turns.holding(key, owner); conn != nil {
		token, changed, err = b.handoverTurn(ctx, conn, name, key, owner, next, ttl, done)
		if err == nil || ctx.Err() != nil {
			return token, changed, err
		}
		// The turn's session failed: hand over on another connection (see
		// releaseMySQL).
	}
	changed, token, err = sqlconn.AffectedAndID(b.db.Exec(ctx, b.q.handover, next, b.turns.turnName(key), ttl.Milliseconds(), key, owner))
	if err != nil || changed == 0 || token > inLine {
		return token, changed, err
	}
	if token == inLine { // freed for everyone, and someone stands in line
		b.turns.yield(key)
	}
	return 0, changed, nil
}

// migrateWaited adds the waited column to a lock table made before it.
// It first reads the column, which takes no lock that holders wait for;
// a table made by another process meanwhile may have it already, which a
// failed ALTER then shows.
func migrateWaited(ctx context.Context, db sqlconn.DB, q queries) error {
	if _, err := sqlconn.Strings(ctx, db, q.hasWaited); err == nil {
		return nil
	}
	_, alterErr := db.Exec(ctx, q.addWaited)
	if _, err := sqlconn.Strings(ctx, db, q.hasWaited); err != nil {
		return fmt.Errorf("adding column waited: %w", alterErr)
	}
	return nil
}
