package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Claim raises the row's token to h's, if the row's token is at most h's,
// and changes nothing else: from then on the row refuses every write with a
// lower token, so a holder that reads after its claim cannot have its read
// overtaken by a stale holder's write. Inside a transaction ([Guard.In]) the
// claim also locks the row until commit: PostgreSQL's UPDATE takes the row
// lock, SQLite's takes the database's write lock.
//
// Claim is one UPDATE statement; when it matches no row, a SELECT of the
// row's token tells why. Errors: fence.ErrStale (the row has a higher
// token; nothing changed), fence.ErrNotFound (no such row; nothing is
// created: create rows with [Guard.Upsert]), an error wrapping
// fence.ErrInvalid (bad holder; the server is not touched), or the
// database's error.
func (g *Guard) Claim(ctx context.Context, h fence.Holder, key any) error {
	t, err := fence.TokenOf(h)
	if err != nil {
		return err
	}
	q, args := g.update(t, key, nil, nil, nil)
	return g.decide(ctx, "claim", t, key, func() (bool, error) { return g.exec(ctx, "claim", q, args) })
}

// Read claims the row as [Guard.Claim] does and returns the columns named
// in into, through their pointers, in the same statement:
//
//	UPDATE t SET fence_token = $1 WHERE id = $2 AND COALESCE(fence_token, 0) <= $1
//	RETURNING balance
//
// It is the read of a read-modify-write. Fencing a write alone is not
// enough for one: the fresh holder (token 2) reads 1000; the paused stale
// holder (token 1) wakes and writes 900, which the row accepts because it
// still carries token 0; the fresh holder writes 700 from its read, and the
// stale holder's debit, acknowledged, is gone. A Read puts token 2 on the
// row before the value is read, so the stale write is refused and the
// fresh holder's read stays true until its write.
//
// In a transaction ([Guard.In]), the row stays locked from the Read to
// commit, so no one, not even a holder with a higher token, writes between
// the read and the write; a rollback undoes the claim. Without one, the Read
// commits on its own and the write is a second statement; a holder with a
// higher token may write in between, and then the later write is refused
// with fence.ErrStale, so an update can be refused but never lost.
//
// Read is one UPDATE ... RETURNING statement (SQLite 3.35 or later); on
// MySQL, which has no RETURNING, an UPDATE and a locking SELECT, two round
// trips. When the claim matches no row, a SELECT of the row's token tells
// why. A deadlock or lock wait timeout is an error wrapping ErrRetry. Errors:
// fence.ErrStale (the row has a higher token; nothing changed, nothing
// read), fence.ErrNotFound (no such row; nothing is created), an error
// wrapping fence.ErrInvalid (bad holder, no columns, a name that is not a
// plain identifier, a destination that is not a non-nil pointer; the server
// is not touched), or the database's error, such as a value that does not
// fit its destination (the claim may then have been made).
func (g *Guard) Read(ctx context.Context, h fence.Holder, key any, into Into) error {
	t, err := fence.TokenOf(h)
	if err != nil {
		return err
	}
	if len(into) == 0 {
		return fmt.Errorf("%w: sqlfence: no columns to read (Claim claims alone)", fence.ErrInvalid)
	}
	cols, dest, err := sqldialect.Dest(into)
	if err != nil {
		return fmt.Errorf("%w: sqlfence: %w", fence.ErrInvalid, err)
	}
	q, args := g.update(t, key, nil, nil, cols)
	if g.dialect == MySQL {
		return g.readMySQL(ctx, t, key, q, args, cols, dest)
	}
	return g.decide(ctx, "read", t, key, func() (bool, error) {
		switch err := g.db.QueryRow(ctx, q, args...).Scan(dest...); {
		case errors.Is(err, sql.ErrNoRows):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("sqlfence: read %s: %w", g.table, sqldialect.Retryable(err))
		}
		return true, nil
	})
}

// readMySQL is Read without RETURNING: the claim's UPDATE, then a locking
// SELECT of the columns on the row that still carries h's token. In a
// transaction the UPDATE's row lock holds from the claim to commit, and the
// SELECT reads the row as the UPDATE left it, not the transaction's
// REPEATABLE READ snapshot. Without one, a newer holder may claim between the
// two statements: the SELECT then finds a higher token and Read returns
// fence.ErrStale, with nothing read.
func (g *Guard) readMySQL(ctx context.Context, t uint64, key any, claim string, args []any, cols []string, dest []any) error {
	if err := g.decide(ctx, "read", t, key, func() (bool, error) { return g.exec(ctx, "read", claim, args) }); err != nil {
		return err
	}
	q := g.dialect.Rebind(fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 AND COALESCE(%s, 0) = $2%s",
		strings.Join(cols, ", "), g.table, g.key, g.token, g.dialect.LockRead()))
	switch err := g.db.QueryRow(ctx, q, key, int64(t)).Scan(dest...); {
	case errors.Is(err, sql.ErrNoRows):
		fence.Refused(ctx, fence.Refusal{Guard: "sql", Op: "read"})
		return fmt.Errorf("%w: %s row %v was claimed by a newer holder right after token %d's claim", fence.ErrStale, g.table, key, t)
	case err != nil:
		return fmt.Errorf("sqlfence: read %s: %w", g.table, sqldialect.Retryable(err))
	}
	return nil
}
