package sqllock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// inspectQueries are the operator's statements for one dialect and table.
type inspectQueries struct {
	one  string // $1 key -> owner, token, remaining ms, waited for
	list string // $1 LIKE pattern, $2 prefix, $3 after key, $4 limit -> key, owner, token, remaining ms, waited for
}

func newInspectQueries(d Dialect, table string) inspectQueries {
	fill := func(q string) string { return d.Fill(q, "{table}", table) }
	if d == MySQL {
		// key is a reserved word there, and keys are bytes (VARBINARY), so
		// LIKE compares them exactly; the arguments are listArgs'.
		return inspectQueries{
			one: fill("SELECT owner, token, expires_at - {now_ms}, waited > {now_ms} FROM {table}\n" +
				"WHERE `key` = ? AND owner IS NOT NULL AND expires_at > {now_ms} AND expires_at <> " + markExpiry),
			list: fill("SELECT `key`, owner, token, expires_at - {now_ms}, waited > {now_ms} FROM {table}\n" +
				"WHERE `key` LIKE ? ESCAPE '|' AND `key` > ?\n" +
				"\tAND owner IS NOT NULL AND expires_at > {now_ms} AND expires_at <> " + markExpiry + "\n" +
				"ORDER BY `key` LIMIT ?"),
		}
	}
	return inspectQueries{
		// A row another mode marked (modes.go) is no lock's.
		one: fill(`SELECT owner, token, expires_at - {now_ms}, waited > {now_ms} FROM {table}
WHERE key = $1 AND owner IS NOT NULL AND expires_at > {now_ms} AND expires_at <> ` + markExpiry),
		// LIKE finds the rows by the key's index where it can; the exact
		// comparison after it keeps SQLite's case-blind LIKE from matching
		// more.
		list: fill(`SELECT key, owner, token, expires_at - {now_ms}, waited > {now_ms} FROM {table}
WHERE key LIKE $1 ESCAPE '\' AND substr(key, 1, length($2)) = $2 AND key > $3
	AND owner IS NOT NULL AND expires_at > {now_ms} AND expires_at <> ` + markExpiry + `
ORDER BY key LIMIT $4`),
	}
}

// likePrefix is a LIKE pattern matching the strings that start with p, its
// wildcards escaped with esc.
func likePrefix(p, esc string) string {
	return strings.NewReplacer(esc, esc+esc, `%`, esc+`%`, `_`, esc+`_`).Replace(p) + "%"
}

// InspectLock implements lock.Inspector. The table records neither when a
// lock was taken (AcquiredAt is zero) nor how many wait (Waiters is
// lock.Unknown); Waiting tells that a waiter of another Locker marked the
// lock in the last ten seconds (waitedMark). On PostgreSQL the Lockers
// waiting through pgx stand in the table <table>_queue (queue.go).
func (l *Locker) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, _, err := l.inspect(ctx, key)
	return info, err
}

func (l *Locker) inspect(ctx context.Context, key string) (info lock.LockInfo, owner string, err error) {
	var token, left int64
	var waited bool
	info = lock.LockInfo{Key: key, Waiters: lock.Unknown}
	ok, err := sqlconn.ScanOne(l.backend.db.QueryRow(ctx, l.iq.one, key), &owner, &token, &left, &waited)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("sqllock: %w", err)
		}
		return info, "", err
	}
	return heldInfo(key, owner, token, left, waited), owner, nil
}

func heldInfo(key, owner string, token, leftMillis int64, waited bool) lock.LockInfo {
	info := lock.LockInfo{Key: key, Held: true, Token: uint64(token), Waiters: lock.Unknown,
		TimeLeft: time.Duration(leftMillis) * time.Millisecond, Waiting: waited}
	_, info.Holder, _ = lock.ParseOwner(owner)
	return info
}

// ListLocks implements lock.Lister: one statement, in key order, the cursor
// the last key listed.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if after := string(raw); err != nil || !strings.HasPrefix(after, prefix) && after != "" {
		return lock.LockPage{}, fmt.Errorf("%w: sqllock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
	}
	var page lock.LockPage
	args := []any{likePrefix(prefix, `\`), prefix, string(raw), limit}
	if l.backend.dialect == MySQL {
		args = []any{likePrefix(prefix, "|"), string(raw), limit}
	}
	err = sqlconn.Each(ctx, l.backend.db, l.iq.list, args, func(scan func(...any) error) error {
		var key, owner string
		var token, left int64
		var waited bool
		if err := scan(&key, &owner, &token, &left, &waited); err != nil {
			return err
		}
		page.Locks = append(page.Locks, heldInfo(key, owner, token, left, waited))
		return nil
	})
	if err != nil {
		return lock.LockPage{}, fmt.Errorf("sqllock: %w", err)
	}
	if len(page.Locks) == limit {
		page.Cursor = base64.RawURLEncoding.EncodeToString([]byte(page.Locks[limit-1].Key))
	}
	return page, nil
}

// BreakLock implements lock.Breaker: it reads the holder, then releases the
// lock as that holder (compare-and-delete, a NOTIFY on PostgreSQL), so a
// holder that changed in between is left alone.
func (l *Locker) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, owner, err := l.inspect(ctx, key)
	if err != nil {
		return info, err
	}
	if info.Held {
		err = l.backend.Release(ctx, key, owner)
	}
	if !info.Held || errors.Is(err, lock.ErrNotHeld) {
		return info, fmt.Errorf("%w: sqllock: %q is not held", lock.ErrNotHeld, key)
	}
	return info, err
}
