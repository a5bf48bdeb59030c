package sqllock

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock"
)

// One name is one resource: on SQLite a lock (an election's term included),
// a read-write lock and a semaphore of one name exclude each other. SQLite
// lets one writer in at a time, and a statement that writes takes that lock
// before it reads, so a check within an acquisition's first write, or after
// it in its transaction, sees every other mode's committed holders and none
// can commit until it is done: a lock's acquisition is one statement whose
// insert is conditioned on no other mode holding the name (lockLive's
// complement, in newQueries), and a read-write lock's or a semaphore's
// transaction checks after its first write (otherMode) and rolls back with a
// *lock.ModeError if another mode holds it. The other modes' tables are the
// default ones (DefaultTable, DefaultRWTable, DefaultSemaphoreTable); every
// SQLite constructor creates all of them.
//
// PostgreSQL and MySQL do not check yet: there the modes of one name are
// still separate resources.

// The conditions, on SQLite, that a mode holds name $1, read against the
// default tables.
const (
	lockLive = `EXISTS (SELECT 1 FROM ` + DefaultTable + ` WHERE key = $1 AND owner IS NOT NULL AND expires_at > {now_ms})`
	rwLive   = `EXISTS (SELECT 1 FROM ` + DefaultRWTable + `_holders WHERE name = $1 AND mode IN ('r', 'w') AND expires_at > {now_ms})`
	// semPermits is N of the semaphore whose permits hold name, else 0.
	semPermits = `(SELECT COALESCE(MAX(s.permits), 0) FROM ` + DefaultSemaphoreTable + ` AS s WHERE s.name = $1
		AND EXISTS (SELECT 1 FROM ` + DefaultSemaphoreTable + holdersSuffix + ` AS h WHERE h.name = $1 AND h.expires_at > {now_ms}))`
)

// heldSQL reads how name $1 is held in each mode: by a live lock (1 or 0),
// by live readers or writers (1 or 0), by live permits (the semaphore's N,
// else 0).
const heldSQL = `SELECT ` + lockLive + `, ` + rwLive + `, ` + semPermits

// modeQuery returns heldSQL for dialect d (SQLite), or "" where modes are
// not checked.
func modeQuery(d Dialect) string {
	if d != SQLite {
		return ""
	}
	return d.Fill(heldSQL)
}

// modeError returns the *lock.ModeError of an acquisition in mode own that
// found name held as a lock (locks > 0), a read-write lock (rw > 0) or a
// semaphore of permits permits (> 0), or nil if no other mode holds it.
func modeError(name, own string, locks, rw, permits int64) error {
	switch {
	case own != lock.ModeLock && locks > 0:
		return &lock.ModeError{Key: name, HeldAs: lock.ModeLock}
	case own != lock.ModeReadWrite && rw > 0:
		return &lock.ModeError{Key: name, HeldAs: lock.ModeReadWrite}
	case own != lock.ModeSemaphore && permits > 0:
		return &lock.ModeError{Key: name, HeldAs: lock.ModeSemaphore, Permits: int(permits)}
	}
	return nil
}

// familyMigrations are the statements that create the tables of every mode
// on SQLite, which each mode's check reads.
func familyMigrations(d Dialect) ([]string, error) {
	if d != SQLite {
		return nil, nil
	}
	lq, err := newQueries(d, DefaultTable)
	if err != nil {
		return nil, err
	}
	rq, err := newRWQueries(d, DefaultRWTable)
	if err != nil {
		return nil, err
	}
	stmts := append(append([]string{}, lq.migrate...), rq.migrate...)
	return append(stmts, newSemQueries(d, DefaultSemaphoreTable).migrate...), nil
}

// otherMode reports, within the transaction of an acquisition in mode own,
// a *lock.ModeError if another mode holds name; nil if none does or the
// dialect does not check (query "").
func otherMode(ctx context.Context, tx sqlconn.Querier, query, name, own string) error {
	if query == "" {
		return nil
	}
	var locks, rw, permits int64
	if _, err := sqlconn.ScanOne(tx.QueryRow(ctx, query, name), &locks, &rw, &permits); err != nil {
		return err
	}
	return modeError(name, own, locks, rw, permits)
}

// migrateFamily creates, on SQLite, the tables of every mode.
func migrateFamily(ctx context.Context, db sqlconn.DB, d Dialect) error {
	stmts, err := familyMigrations(d)
	if err != nil {
		return fmt.Errorf("%w: sqllock: %w", lock.ErrInvalid, err)
	}
	if err := migrate(ctx, db, d, DefaultTable, stmts); err != nil {
		return fmt.Errorf("sqllock: creating the tables of every mode: %w", err)
	}
	return nil
}
