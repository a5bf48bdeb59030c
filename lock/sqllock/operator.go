package sqllock

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// The operator's view of read-write locks and semaphores: their names, in
// name order, from the holders' tables, and breaking one holder, which is
// its own release (compare-and-delete of its owner, with the NOTIFY on
// PostgreSQL) done for it.

var (
	_ rwlock.Lister     = (*rwBackend)(nil)
	_ rwlock.Breaker    = (*rwBackend)(nil)
	_ semaphore.Lister  = (*semBackend)(nil)
	_ semaphore.Breaker = (*semBackend)(nil)
)

// listNamesSQL is the statement that lists the names with a live hold in a
// holders table (fill's {holders}), where also holds: PostgreSQL and SQLite
// take $1 the LIKE pattern, $2 the prefix, $3 the name after which to go on,
// $4 the limit; MySQL $1, $3 and $4.
func listNamesSQL(d Dialect, fill func(string) string, also string) string {
	if d == MySQL {
		return fill(`SELECT DISTINCT name FROM {holders}
WHERE name LIKE $1 ESCAPE '|' AND name > $2 AND expires_at > {now_ms}` + also + `
ORDER BY name LIMIT $3`)
	}
	return fill(`SELECT DISTINCT name FROM {holders}
WHERE name LIKE $1 ESCAPE '\' AND substr(name, 1, length($2)) = $2 AND name > $3 AND expires_at > {now_ms}` + also + `
ORDER BY name LIMIT $4`)
}

// listNames runs a listNamesSQL statement: the cursor is the last name
// listed, and a full page has one.
func listNames(ctx context.Context, db sqlconn.DB, d Dialect, q, prefix string, limit int, cursor string) ([]string, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if after := string(raw); err != nil || !strings.HasPrefix(after, prefix) && after != "" {
		return nil, "", fmt.Errorf("%w: sqllock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
	}
	args := []any{likePrefix(prefix, `\`), prefix, string(raw), limit}
	if d == MySQL {
		args = []any{likePrefix(prefix, "|"), string(raw), limit}
	}
	var names []string
	err = sqlconn.Each(ctx, db, q, args, func(scan func(...any) error) error {
		var n string
		if err := scan(&n); err != nil {
			return err
		}
		names = append(names, n)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("sqllock: %w", err)
	}
	next := ""
	if len(names) == limit {
		next = base64.RawURLEncoding.EncodeToString([]byte(names[limit-1]))
	}
	return names, next, nil
}

// ListRW implements rwlock.Lister.
func (b *rwBackend) ListRW(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return listNames(ctx, b.db, b.dialect, b.q.list, prefix, limit, cursor)
}

// BreakRW implements rwlock.Breaker: it finds the holder with token, then
// releases as that holder, so a holder that left meanwhile is not
// mistaken for another.
func (b *rwBackend) BreakRW(ctx context.Context, name string, token uint64) (rwlock.Holder, bool, error) {
	h, writer, err := rwlock.HolderOf(ctx, b, name, token)
	if err != nil {
		return h, writer, err
	}
	if err := b.Release(ctx, name, h.Label, rwlock.ModeOf(writer)); err != nil {
		return h, false, err
	}
	return h, writer, nil
}

// ListSemaphores implements semaphore.Lister.
func (b *semBackend) ListSemaphores(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return listNames(ctx, b.db, b.dialect, b.q.list, prefix, limit, cursor)
}

// BreakPermits implements semaphore.Breaker, as BreakRW does.
func (b *semBackend) BreakPermits(ctx context.Context, name string, token uint64) (semaphore.HolderInfo, error) {
	info, owners, err := b.inspect(ctx, name)
	if err != nil {
		return semaphore.HolderInfo{}, err
	}
	i := slices.IndexFunc(info.Holders, func(h semaphore.HolderInfo) bool { return h.Token == token })
	if i < 0 {
		return semaphore.HolderInfo{}, lockerr.NotHeld(fmt.Sprintf("sqllock: no holder of semaphore %q has token %d", name, token))
	}
	return info.Holders[i], b.release(ctx, name, owners[i])
}
