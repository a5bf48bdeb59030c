package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// backend implements driver.Backend and driver.BatchRenewer on a lease table.
type backend struct {
	db      sqlconn.DB
	dialect Dialect
	q       queries
	marks   marks // the other modes' marks (modes.go; PostgreSQL, MySQL)
	// turns are MySQL's turns (turns.go): nil unless the Locker was made on
	// a *sql.DB for MySQL.
	turns *turns
	// waiting is which owners wait, whose attempts queue their Locker on
	// the server (queue.go): nil unless the Locker LISTENs (PostgreSQL
	// through pgx: a pool, or its database/sql driver).
	waiting *waiting
}

var (
	_ driver.Backend      = (*backend)(nil)
	_ driver.BatchRenewer = (*backend)(nil)
)

func (b *backend) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	if b.dialect == MySQL {
		token, _, left, err := b.tryAcquireMySQL(ctx, key, owner, ttl, false)
		return token, left, err
	}
	if b.dialect == Postgres {
		return b.tryAcquirePostgres(ctx, key, owner, ttl)
	}
	if left, err := b.peekSQLite(ctx, key, owner); err != nil {
		return 0, left, err
	}
	var (
		token sql.NullInt64
		left  int64
	)
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.acquire, key, owner, ttl.Milliseconds()), &token, &left)
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if ok && token.Valid {
		return uint64(token.Int64), 0, nil
	}
	// Held, by a lock or another mode (see modes.go): ask which, and how
	// long a holding lock has left, to time the next attempt. (SQLite runs
	// in-process, so the second statement costs no round trip.) A lease in
	// its last millisecond is reported as 1 ms, not unknown.
	var held sql.NullInt64
	var rw, permits int64
	var marked sql.NullBool // the upsert marked the row if it had to
	if ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.holder, key, owner), &held, &rw, &permits, &marked); err != nil || !ok {
		left = 0
	} else if err := modeError(key, lock.ModeLock, 0, rw, permits); err != nil {
		return 0, 0, err
	} else {
		left = max(held.Int64, 1)
	}
	return 0, time.Duration(left) * time.Millisecond, lock.ErrNotAcquired
}

// tryAcquirePostgres is TryAcquire on PostgreSQL: one statement, which
// also queues the Locker of a waiting owner, or takes it out of the queue
// (queue.go).
func (b *backend) tryAcquirePostgres(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	var (
		token  sql.NullInt64
		left   int64
		queued bool
	)
	waits, promised := b.waiting.waits(key, owner)
	if promised > 0 {
		// This Locker released key with a promise to another: refused.
		return 0, promised, lock.ErrNotAcquired
	}
	query := b.q.acquire
	if waits {
		query = b.q.acquireWaiting
	}
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, query, key, owner, ttl.Milliseconds()), &token, &left, &queued)
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if waits {
		b.waiting.attempted(key, queued)
	}
	if ok && token.Valid {
		return uint64(token.Int64), 0, nil
	}
	if left > lock.MaxTTL.Milliseconds() {
		return b.takeOver(ctx, key, owner, ttl)
	}
	return 0, time.Duration(max(left, 0)) * time.Millisecond, lock.ErrNotAcquired
}

// tryAcquireMySQL is TryAcquire in the statements of mysqlQueries, and
// TryAcquirePartial if partial: the lock the key's turn took for a waiting
// call of the Locker (turns.go), else one statement, whose LAST_INSERT_ID is
// the token, or, held, refusedFlag plus the holder's time left in ms. valid
// is the lease's, from the call's start: ttl unless partial.
func (b *backend) tryAcquireMySQL(ctx context.Context, key, owner string, ttl time.Duration, partial bool) (token uint64, valid, left time.Duration, err error) {
	if token, valid, ok := b.collect(ctx, key, owner, ttl, partial); ok {
		return token, valid, 0, nil
	}
	if b.turns.outOfTurn(key, owner, ttl) {
		return 0, 0, 0, lock.ErrNotAcquired // the holder's time left is not known here
	}
	id, err := sqlconn.LastID(b.db.Exec(ctx, b.q.acquire, key, owner, ttl.Milliseconds()))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if id > 0 && id < refusedFlag {
		b.turns.attempted(key, owner, ttl, true, false, 0)
		return uint64(id), ttl, 0, nil
	}
	ms := max(id-refusedFlag, 0) // 0: unknown
	other := ms&otherFlag != 0
	ms &^= otherFlag
	if ms > lock.MaxTTL.Milliseconds() {
		token, left, err := b.takeOver(ctx, key, owner, ttl)
		return token, ttl, left, err
	}
	left = time.Duration(ms) * time.Millisecond
	b.turns.attempted(key, owner, ttl, false, other, left)
	return 0, 0, left, lock.ErrNotAcquired
}

// collect returns the lock the key's turn took for a waiting call of the
// Locker, if there is one, for owner: valid from now, which is after the
// call began. The server counts that lease from when the taking statement
// began, after it was sent: what is left of it is certain. A lease of the full ttl (not
// partial), one with less than a third left, or one taken for another call
// of the Locker, costs a renewal or a relabel first; a lock lost meanwhile
// is not collected.
func (b *backend) collect(ctx context.Context, key, owner string, ttl time.Duration, partial bool) (token uint64, valid time.Duration, ok bool) {
	tk, ok := b.turns.collect(key, owner)
	if !ok {
		return 0, 0, false
	}
	valid = min(time.Until(tk.sent.Add(tk.ttl)), ttl)
	err := error(nil)
	if tk.owner != owner {
		var n int64
		n, err = sqlconn.Affected(b.db.Exec(ctx, b.q.relabel, owner, key, tk.owner))
		if err == nil && n == 0 {
			err = errNotHeld
		}
	}
	if err == nil && (!partial || valid < ttl/3) {
		valid, err = ttl, b.Renew(ctx, key, owner, ttl)
	}
	if err != nil || valid <= 0 {
		// Lost, not ours, or not confirmed: the turn stays, the Locker's
		// calls attempt. A lock the server may still keep for the call
		// (a statement that failed) is given back, not left to expire.
		b.turns.uncollect(key, owner)
		if err != nil && !errors.Is(err, errNotHeld) {
			_ = b.Release(ctx, key, owner)
			if tk.owner != owner {
				_ = b.Release(ctx, key, tk.owner)
			}
		}
		return 0, 0, false
	}
	return uint64(tk.token), valid, true
}

// takeOver is TryAcquire of a key whose row another mode marked (no lease
// is longer than lock.MaxTTL): see modes.go.
func (b *backend) takeOver(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	token, err := b.marks.takeOver(ctx, b.db, key, owner, ttl)
	switch {
	case err == nil:
		return token, 0, nil
	case errors.Is(err, lock.ErrNotAcquired), errors.Is(err, lock.ErrOtherMode):
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("sqllock: %w", err)
}

func (b *backend) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	if b.dialect == MySQL {
		// Matched, even when the expiry stayed what it was: see mysqlQueries.
		at, err := sqlconn.LastID(b.db.Exec(ctx, b.q.renew, ttl.Milliseconds(), key, owner))
		if err != nil {
			return fmt.Errorf("sqllock: %w", err)
		}
		if at == 0 {
			b.turns.lost(key, owner)
			return errNotHeld
		}
		return nil
	}
	n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.renew, key, owner, ttl.Milliseconds()))
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if n == 0 {
		return errNotHeld
	}
	return nil
}

func (b *backend) Release(ctx context.Context, key, owner string) error {
	if b.dialect == MySQL {
		return b.releaseMySQL(ctx, key, owner)
	}
	if b.dialect == Postgres {
		return b.releasePostgres(ctx, key, owner)
	}
	var released any
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.release, key, owner), &released)
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if !ok {
		return errNotHeld
	}
	return nil
}

// releasePostgres is Release on PostgreSQL: a release that promised the
// lock to another Locker (queue.go) spares this Locker's next attempts on
// key, refused until the promise ends.
func (b *backend) releasePostgres(ctx context.Context, key, owner string) error {
	sent := time.Now()
	var promised sql.NullString
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.release, key, owner, keyHash(key)), &promised)
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: %w", err)
	case !ok:
		return errNotHeld
	case promised.Valid && promised.String != lockerID(owner):
		b.waiting.promisedElsewhere(key, sent)
	}
	return nil
}

// releaseMySQL is Release on MySQL: on the session holding key's turn if
// owner took the lock under it (turns.go), else on any. A release while
// another Locker stands in line for the turn sends this Locker's next
// attempts on key to the line too.
func (b *backend) releaseMySQL(ctx context.Context, key, owner string) error {
	if conn, name, done := b.turns.holding(key, owner); conn != nil {
		err := b.releaseTurn(ctx, conn, name, key, owner, done)
		if err == nil || errors.Is(err, errNotHeld) || ctx.Err() != nil {
			return err
		}
		// The turn's session failed (killed, cut off): the turn went with
		// it. Release on another connection; if the first release was
		// done after all, this one says not held.
	}
	n, line, err := sqlconn.AffectedAndID(b.db.Exec(ctx, b.q.release, b.turns.turnName(key), key, owner))
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: %w", err)
	case n == 0: // the expiry always changes: changed rows are matched rows
		return errNotHeld
	case line == inLine:
		b.turns.yield(key)
	}
	return nil
}

// errNotHeld is the answer of a renewal or release that found the lock not
// ours: released, expired, or another owner's.
var errNotHeld = lockerr.NotHeld("sqllock: the lock expired or another owner holds it")

// maxBatch bounds the leases renewed by one statement.
const maxBatch = 1000

func (b *backend) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	errs := make([]error, len(batch))
	for start := 0; start < len(batch); start += maxBatch {
		chunk := batch[start:min(start+maxBatch, len(batch))]
		renewed, err := b.renewChunk(ctx, chunk)
		for i, r := range chunk {
			switch {
			case err != nil:
				errs[start+i] = fmt.Errorf("sqllock: %w", err)
			case !renewed[r.Key]:
				errs[start+i] = errNotHeld
				b.turns.lost(r.Key, r.Owner)
			}
		}
	}
	return errs
}

func (b *backend) renewChunk(ctx context.Context, chunk []driver.Renewal) (map[string]bool, error) {
	var args []any
	switch b.dialect {
	case MySQL:
		return b.renewChunkMySQL(ctx, chunk)
	case Postgres:
		keys, owners, ttls := make([]string, len(chunk)), make([]string, len(chunk)), make([]int64, len(chunk))
		for i, r := range chunk {
			keys[i], owners[i], ttls[i] = r.Key, r.Owner, r.TTL.Milliseconds()
		}
		args = []any{keys, owners, ttls}
	default:
		triples := make([][3]any, len(chunk))
		for i, r := range chunk {
			triples[i] = [3]any{r.Key, r.Owner, r.TTL.Milliseconds()}
		}
		js, err := json.Marshal(triples)
		if err != nil {
			return nil, err
		}
		args = []any{string(js)}
	}
	keys, err := sqlconn.Strings(ctx, b.db, b.q.batch, args...)
	if err != nil {
		return nil, err
	}
	renewed := make(map[string]bool, len(keys))
	for _, k := range keys {
		renewed[k] = true
	}
	return renewed, nil
}

// renewChunkMySQL renews a chunk in one UPDATE; only when fewer rows changed
// than leases were asked does a SELECT tell which are still held. Keys and
// owners travel hex-encoded, so JSON keeps every byte.
func (b *backend) renewChunkMySQL(ctx context.Context, chunk []driver.Renewal) (map[string]bool, error) {
	triples := make([][3]any, len(chunk))
	for i, r := range chunk {
		triples[i] = [3]any{hex.EncodeToString([]byte(r.Key)), hex.EncodeToString([]byte(r.Owner)), r.TTL.Milliseconds()}
	}
	js, err := json.Marshal(triples)
	if err != nil {
		return nil, err
	}
	n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.batch, string(js)))
	if err != nil {
		return nil, err
	}
	renewed := make(map[string]bool, len(chunk))
	if n == int64(len(chunk)) {
		// Each lease is one row, and no row can change for two of them.
		for _, r := range chunk {
			renewed[r.Key] = true
		}
		return renewed, nil
	}
	// Held now means renewed: a lease that the UPDATE found expired cannot
	// be its owner's again, owners being new for every Acquire.
	keys, err := sqlconn.Strings(ctx, b.db, b.q.held, string(js))
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		renewed[k] = true
	}
	return renewed, nil
}

// keyHash names a key in NOTIFY payloads: fixed length whatever the key, and
// the key itself never leaves for other listeners to read.
func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:16])
}
