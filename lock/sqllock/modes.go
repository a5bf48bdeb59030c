package sqllock

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// PostgreSQL and MySQL do it with marks (below).

// The conditions, on SQLite, that a mode holds name $1, read against the
// default tables.
const (
	lockLive = `EXISTS (SELECT 1 FROM ` + DefaultTable + ` WHERE key = $1 AND owner IS NOT NULL AND expires_at > {now_ms})`
	rwLive   = `EXISTS (SELECT 1 FROM ` + DefaultRWTable + `_holders WHERE name = $1 AND mode IN ('r', 'w') AND expires_at > {now_ms})`
	// semPermits is N of the semaphore whose permits hold name, else 0.
	semPermits = `(SELECT COALESCE(MAX(s.permits), 0) FROM ` + DefaultSemaphoreTable + ` AS s WHERE s.name = $1
		AND EXISTS (SELECT 1 FROM ` + DefaultSemaphoreTable + holdersSuffix + ` AS h WHERE h.name = s.name AND h.expires_at > {now_ms}))`
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

// familyMigrations are the statements that create the tables of every mode,
// which each mode's check reads.
func familyMigrations(d Dialect) ([]string, error) {
	lq, err := newQueries(d, DefaultTable)
	if err != nil {
		return nil, err
	}
	stmts := append([]string{}, lq.migrate...)
	if d != MySQL { // which has no read-write locks
		rq, err := newRWQueries(d, DefaultRWTable)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, rq.migrate...)
	}
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

// migrateFamily creates the tables of every mode. On SQLite it first looks
// whether they exist, a read that takes no write lock: five CREATE TABLE IF
// NOT EXISTS per constructor, opened beside busy holders, held up their
// renewals (a semaphore's, with a 1 s lease, past its deadline).
func migrateFamily(ctx context.Context, db sqlconn.DB, d Dialect) error {
	if d == SQLite {
		var n int64
		names := []any{DefaultTable, DefaultRWTable, DefaultRWTable + "_holders", DefaultSemaphoreTable, DefaultSemaphoreTable + holdersSuffix}
		if _, err := sqlconn.ScanOne(db.QueryRow(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ($1, $2, $3, $4, $5)`, names...), &n); err == nil && n == int64(len(names)) {
			return nil
		}
	}
	stmts, err := familyMigrations(d)
	if err != nil {
		return fmt.Errorf("%w: sqllock: %w", lock.ErrInvalid, err)
	}
	if err := migrate(ctx, db, d, stmts); err != nil {
		return fmt.Errorf("sqllock: creating the tables of every mode: %w", err)
	}
	return nil
}

// On PostgreSQL and MySQL, whose statements read a snapshot and cannot see
// another transaction's holder until it commits, the modes meet on the
// name's row of the lock table (DefaultTable): a read-write lock's or a
// semaphore's acquisition first marks that row as its mode's (owner rwMark
// or semMark, expiry never), in its own transaction, unless a live lock holds
// it. The mark bumps the row's token (a lock's tokens only rise from it), so
// the row is locked until that transaction ends and every change of mark can
// be compared. A lock's one-statement acquisition finds a marked row not
// free, as it finds a held one; only then does it look for the mark's live
// holders, and with none it takes the row over by comparing the token it
// read (takeOver). A mode that finds another mode's mark does the same
// (remarkFor). So of two acquisitions in different modes one waits on the
// row's lock for the other and then sees its mark, or its holders.
const (
	rwMark  = "mode:read-write"
	semMark = "mode:semaphore"
	// markExpiry is a mark's expiry: never, so a lock's acquisition never
	// takes a marked row as expired.
	markExpiry = "9223372036854775807"
)

// claimSQL marks the lock row of name {name} with mark {mark} unless a live
// lock holds it or another mode marked it, and returns a row if it did (or
// the mark was there): the claim of marks and of PostgreSQL's semaphore
// acquisition function.
const claimSQL = `INSERT INTO {locks} AS l (key, owner, expires_at, token) VALUES ({name}, {mark}, {never}, 0)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, token = l.token + 1
WHERE l.owner IS NULL OR l.expires_at <= {now_ms} OR l.owner = excluded.owner
RETURNING 1`

// claimMySQL is claimSQL on MySQL, whose assignments read the values
// assigned before them: the owner first, on the condition, then the rest on
// "the row is now ours". Whether it was claimed is read back (markedSQL).
const claimMySQL = "INSERT INTO {locks} (`key`, owner, expires_at, token) VALUES ($1, $2, {never}, 0)\n" +
	"ON DUPLICATE KEY UPDATE\n" +
	"\towner = IF(owner IS NULL OR expires_at <= {now_ms} OR owner = VALUES(owner), VALUES(owner), owner),\n" +
	"\texpires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at),\n" +
	"\ttoken = IF(owner = VALUES(owner), token + 1, token)"

// marks are the statements of the marks, on DefaultTable, for PostgreSQL
// or MySQL.
type marks struct {
	d       Dialect
	claim   string // $1 name, $2 mark -> PostgreSQL: a row if the name's row now carries mark
	marked  string // MySQL: $1 name -> owner, read after the claim
	row     string // $1 name -> owner, token, whether a lock's lease is live
	rwLive  string // $1 name -> 1 if readers or writers hold it, else 0
	semLive string // $1 name -> the semaphore's N if permits hold it, else 0
	remark  string // $1 mark, $2 name, $3 old mark, $4 token -> re-marked (a row; MySQL: rows changed)
	take    string // $1 owner, $2 ttl ms, $3 key, $4 old mark, $5 token -> the lock's token (MySQL: LAST_INSERT_ID)
}

func newMarks(d Dialect) marks {
	fill := func(q string) string {
		return d.Fill(q, "{locks}", DefaultTable, "{rw_holders}", DefaultRWTable+"_holders",
			"{sems}", DefaultSemaphoreTable, "{sem_holders}", DefaultSemaphoreTable+holdersSuffix, "{never}", markExpiry)
	}
	m := marks{
		d: d,
		// The conditions SQLite's check reads (one $1 each, for MySQL's ?).
		semLive: fill(`SELECT ` + semPermits),
		rwLive:  fill(`SELECT CASE WHEN ` + rwLive + ` THEN 1 ELSE 0 END`),
	}
	if d == MySQL {
		m.claim = fill(claimMySQL)
		m.marked = fill("SELECT owner FROM {locks} WHERE `key` = $1")
		m.row = fill("SELECT owner, token, expires_at > {now_ms} AND expires_at <> {never} FROM {locks} WHERE `key` = $1 AND owner IS NOT NULL")
		m.remark = fill("UPDATE {locks} SET owner = $1, expires_at = {never}, token = token + 1 WHERE `key` = $2 AND owner = $3 AND token = $4")
		m.take = fill("UPDATE {locks} SET owner = $1, expires_at = {now_ms} + $2, token = LAST_INSERT_ID(GREATEST(token + 1, {now_us}))\n" +
			"WHERE `key` = $3 AND owner = $4 AND token = $5")
		return m
	}
	m.claim = fill(strings.NewReplacer("{name}", "$1", "{mark}", "$2").Replace(claimSQL))
	m.row = fill(`SELECT owner, token, expires_at > {now_ms} AND expires_at <> {never} FROM {locks} WHERE key = $1 AND owner IS NOT NULL`)
	m.remark = fill(`UPDATE {locks} SET owner = $1, expires_at = {never}, token = token + 1
WHERE key = $2 AND owner = $3 AND token = $4 RETURNING 1`)
	m.take = fill(`UPDATE {locks} SET owner = $1, expires_at = {now_ms} + $2, token = GREATEST(token + 1, {now_us})
WHERE key = $3 AND owner = $4 AND token = $5 RETURNING token`)
	return m
}

// claimIn marks name's lock row with mark within tx, and reports whether
// the row now carries it.
func (m marks) claimIn(ctx context.Context, tx sqlconn.Querier, name, mark string) (bool, error) {
	if m.d != MySQL {
		return sqlconn.ScanOne(tx.QueryRow(ctx, m.claim, name, mark), new(int64))
	}
	if _, err := tx.Exec(ctx, m.claim, name, mark); err != nil {
		return false, err
	}
	var owner string
	ok, err := sqlconn.ScanOne(tx.QueryRow(ctx, m.marked, name), &owner)
	return ok && owner == mark, err
}

// markMode is the mode a mark stands for, "" for anything else (a lock's
// owner).
func markMode(owner string) string {
	switch owner {
	case rwMark:
		return lock.ModeReadWrite
	case semMark:
		return lock.ModeSemaphore
	}
	return ""
}

// heldByMark reads the live holders of the mode whose mark is on name's
// row: a *lock.ModeError naming it if it has any, else nil.
func (m marks) heldByMark(ctx context.Context, db sqlconn.Querier, name, mark string) error {
	var n int64
	q := m.rwLive
	if mark == semMark {
		q = m.semLive
	}
	if _, err := sqlconn.ScanOne(db.QueryRow(ctx, q, name), &n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if mark == semMark {
		return &lock.ModeError{Key: name, HeldAs: lock.ModeSemaphore, Permits: int(n)}
	}
	return &lock.ModeError{Key: name, HeldAs: lock.ModeReadWrite}
}

// readRow reads name's lock row: its owner (a lock's, or a mark), token, and
// whether a lock's lease on it is live; ok is false without an owner.
func (m marks) readRow(ctx context.Context, db sqlconn.Querier, name string) (owner string, token int64, live, ok bool, err error) {
	ok, err = sqlconn.ScanOne(db.QueryRow(ctx, m.row, name), &owner, &token, &live)
	return owner, token, live, ok, err
}

// changed runs a compare-and-set statement of marks and reports whether it
// changed the row; on MySQL also the LAST_INSERT_ID it left.
func (m marks) changed(ctx context.Context, db sqlconn.Querier, q string, args ...any) (bool, int64, error) {
	if m.d == MySQL {
		res, err := db.Exec(ctx, q, args...)
		if err != nil {
			return false, 0, err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return false, 0, err
		}
		id, err := res.LastInsertId()
		return true, id, err
	}
	var v int64
	ok, err := sqlconn.ScanOne(db.QueryRow(ctx, q, args...), &v)
	return ok, v, err
}

// remarkFor is the slow path of a read-write lock's or semaphore's
// acquisition (mark) whose claim found name's row not free: a
// *lock.ModeError if a live lock or another mode's live holders hold it;
// nil once it has marked the row for mark (the caller attempts again);
// lock.ErrNotAcquired if the row changed meanwhile.
func (m marks) remarkFor(ctx context.Context, db sqlconn.Querier, name, mark string) error {
	owner, token, live, ok, err := m.readRow(ctx, db, name)
	switch {
	case err != nil:
		return err
	case !ok:
		return lock.ErrNotAcquired // freed meanwhile: attempt again
	case markMode(owner) == "" && live:
		return &lock.ModeError{Key: name, HeldAs: lock.ModeLock}
	case markMode(owner) == "" || owner == mark:
		return lock.ErrNotAcquired // expired, or ours meanwhile: attempt again
	}
	if err := m.heldByMark(ctx, db, name, owner); err != nil {
		return err
	}
	if ok, _, err := m.changed(ctx, db, m.remark, mark, name, owner, token); err != nil || !ok {
		if err == nil {
			err = lock.ErrNotAcquired
		}
		return err
	}
	return nil
}

// takeOver is the slow path of a lock's acquisition that found its row
// marked by another mode: a *lock.ModeError if that mode's holders are
// live, else the row taken for owner by comparing the token read, or
// lock.ErrNotAcquired if it changed meanwhile.
func (m marks) takeOver(ctx context.Context, db sqlconn.Querier, key, owner string, ttl time.Duration) (uint64, error) {
	mark, token, _, ok, err := m.readRow(ctx, db, key)
	if err != nil || !ok || markMode(mark) == "" {
		if err == nil {
			err = lock.ErrNotAcquired
		}
		return 0, err
	}
	if err := m.heldByMark(ctx, db, key, mark); err != nil {
		return 0, err
	}
	ok, next, err := m.changed(ctx, db, m.take, owner, ttl.Milliseconds(), key, mark, token)
	if err != nil || !ok {
		if err == nil {
			err = lock.ErrNotAcquired
		}
		return 0, err
	}
	return uint64(next), nil
}
