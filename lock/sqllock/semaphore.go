package sqllock

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// DefaultSemaphoreTable is the semaphore table's name unless WithTable says
// otherwise; the holders' table is its name followed by "_holders".
const DefaultSemaphoreTable = "latchkey_semaphores"

// NewSemaphores returns a semaphore.Client on db, a database/sql handle for
// dialect d (Detect tells it from the driver), and creates its two tables
// if they do not exist: one row per name (N as its holders agreed, and the
// fencing counter) and one row per holder (its permits, token and lease
// end, by the database's clock). An acquisition is one transaction that
// locks the name's row, drops the holders whose lease has ended, counts the
// rest and, if enough permits are free, raises the counter and adds its
// holder row; on SQLite a read first refuses it, without the transaction,
// while the live holders leave too few permits. A renewal or a release is
// one statement on the holder's row,
// and renewals of many permits one statement per dialect batch (PostgreSQL
// and SQLite; MySQL renews each on its own). Waiters poll; NewPgxSemaphores
// wakes them by NOTIFY. WithTable names the semaphore table (default
// "latchkey_semaphores"). Errors wrap lock.ErrInvalid for a nil db, an
// unknown dialect, a bad table name or a server older than latchkey
// supports.
func NewSemaphores(ctx context.Context, db *sql.DB, d Dialect, opts ...Option) (*semaphore.Client, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *sql.DB", lock.ErrInvalid)
	}
	if d == Detect {
		d = sqldialect.Detect(db)
	}
	return newSemaphores(ctx, sqlconn.StdDB(db), d, nil, opts)
}

// NewPgxSemaphores is NewSemaphores on a pgx pool for PostgreSQL: waiters
// are woken by NOTIFY on release, through one LISTEN connection per Client
// while anyone waits. Close the Client when done.
func NewPgxSemaphores(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*semaphore.Client, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *pgxpool.Pool", lock.ErrInvalid)
	}
	return newSemaphores(ctx, pgxconn.Pool(pool), Postgres, pool, opts)
}

func newSemaphores(ctx context.Context, db sqlconn.DB, d Dialect, pool *pgxpool.Pool, opts []Option) (*semaphore.Client, error) {
	o := optionsOf(DefaultSemaphoreTable, opts)
	if !d.Supported() {
		return nil, fmt.Errorf("%w: sqllock: cannot tell the SQL dialect (%v): pass sqllock.Postgres, sqllock.SQLite or sqllock.MySQL", lock.ErrInvalid, d)
	}
	if err := sqldialect.Ident("table", o.table, channelSuffix, holdersSuffix); err != nil {
		return nil, fmt.Errorf("%w: sqllock: %w", lock.ErrInvalid, err)
	}
	q := newSemQueries(d, o.table)
	if err := setUp(ctx, db, d, q.migrate, "the semaphore tables"); err != nil {
		return nil, err
	}
	b := &semBackend{db: db, dialect: d, q: q, modes: modeQuery(d), marks: newMarks(d)}
	var lb semaphore.Backend = b
	switch {
	case pool != nil:
		lb = watchingSemBackend{semBatchBackend{b}, newListener(poolConns(pool), o.table+channelSuffix)}
	case d != MySQL:
		lb = semBatchBackend{b}
	}
	return semaphore.New(lb)
}

// setUp checks the server and creates the tables of every mode, then those
// of stmts, named by tables in the error of their failed creation.
func setUp(ctx context.Context, db sqlconn.DB, d Dialect, stmts []string, tables string) error {
	if err := d.Check(ctx, db, lock.ErrInvalid); err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if err := migrateFamily(ctx, db, d); err != nil {
		return err
	}
	if err := migrate(ctx, db, d, stmts); err != nil {
		return fmt.Errorf("sqllock: creating %s: %w", tables, err)
	}
	return nil
}

// migrate runs the idempotent statements that create a Locker's tables
// (and, for semaphores on PostgreSQL, the acquisition's function). On
// PostgreSQL they run in one transaction under one advisory lock for all of
// latchkey's migrations: concurrent CREATE TABLE IF NOT EXISTS or CREATE OR
// REPLACE FUNCTION of one object collide there (a unique violation, or a
// tuple concurrently updated, in the catalog), and every constructor also
// creates the tables of the other modes (modes.go). SQLite's single writer
// and MySQL's metadata locks serialise them already.
func migrate(ctx context.Context, db sqlconn.DB, d Dialect, stmts []string) error {
	if d != Postgres {
		for _, stmt := range stmts {
			if _, err := db.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}
	return sqlconn.InTx(ctx, db, nil, func(tx sqlconn.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('latchkey migrations'))`); err != nil {
			return err
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// holdersSuffix names the holders' table, after the semaphore table.
const holdersSuffix = "_holders"

// semQueries are the semaphore statements for one dialect and table.
type semQueries struct {
	migrate []string
	ensure  string // $1 name, $2 N -> the name's row, created if missing (locked; PG, SQLite: -> permits, token)
	locked  string // $1 name -> permits, token (MySQL: read with a lock after ensure)
	peek    string // SQLite, before the transaction: $1 name -> permits, live holders, permits held, ms until the first lease ends, another mode holds it
	purge   string // $1 name: drop holders whose lease ended
	count   string // $1, $2 name -> live holders, permits held, ms until the first lease ends, ended holders
	take    string // $1 N, $2 name -> the next token
	// acquireFn (PostgreSQL) is the whole acquisition in one call: $1 name,
	// $2 N, $3 count, $4 owner, $5 ttl ms -> token (NULL unless taken),
	// ms until the first lease ends, the holders' N on a mismatch (else 0).
	acquireFn string
	add       string // $1 name, $2 owner, $3 count, $4 token, $5 ttl ms
	renew     string // $1 ttl ms, $2 name, $3 owner -> rows (MySQL: LAST_INSERT_ID)
	release   string // $1 name, $2 owner [, $3 NOTIFY payload] -> rows
	batch     string // a batch's renewals -> renewed owners
	info      string // $1 name -> owner, count, token, ms left of live holders
	last      string // $1 name -> permits, token
	list      string // names with live holders: listNamesSQL's arguments
}

func newSemQueries(d Dialect, table string) semQueries {
	fill := func(q string) string {
		return d.Fill(q, "{table}", table, "{holders}", table+holdersSuffix, "{channel}", table+channelSuffix,
			"{locks}", DefaultTable, "{sem_mark}", semMark, "{never}", markExpiry)
	}
	text, owner := "TEXT", "TEXT"
	if d == MySQL {
		text, owner = "VARBINARY(1024)", "VARBINARY(255)"
	}
	q := semQueries{
		list: listNamesSQL(d, fill, ""),
		migrate: []string{
			fill("CREATE TABLE IF NOT EXISTS {table} (\n\tname    " + text + " NOT NULL PRIMARY KEY,\n" +
				"\tpermits INTEGER NOT NULL,\n\ttoken   BIGINT NOT NULL\n)"),
			fill("CREATE TABLE IF NOT EXISTS {holders} (\n\tname       " + text + " NOT NULL,\n" +
				"\towner      " + owner + " NOT NULL,\n\tpermits    INTEGER NOT NULL,\n" +
				"\ttoken      BIGINT NOT NULL,\n\texpires_at BIGINT NOT NULL,\n\tPRIMARY KEY (name, owner)\n)"),
		},
		purge: fill(`DELETE FROM {holders} WHERE name = $1 AND expires_at <= {now_ms}`),
		// The live holders, and whether ended ones are left to drop.
		count: fill(`SELECT COUNT(*), COALESCE(SUM(permits), 0), COALESCE(MIN(expires_at) - {now_ms}, 0),
	(SELECT COUNT(*) FROM {holders} WHERE name = $1 AND expires_at <= {now_ms})
FROM {holders} WHERE name = $2 AND expires_at > {now_ms}`),
		add:   fill(`INSERT INTO {holders} (name, owner, permits, token, expires_at) VALUES ($1, $2, $3, $4, {now_ms} + $5)`),
		renew: fill(`UPDATE {holders} SET expires_at = {now_ms} + $1 WHERE name = $2 AND owner = $3 AND expires_at > {now_ms}`),
		info: fill(`SELECT owner, permits, token, expires_at - {now_ms} FROM {holders}
WHERE name = $1 AND expires_at > {now_ms} ORDER BY token`),
		last: fill(`SELECT permits, token FROM {table} WHERE name = $1`),
	}
	switch d {
	case Postgres, SQLite:
		q.ensure = fill(`INSERT INTO {table} AS s (name, permits, token) VALUES ($1, $2, 0)
ON CONFLICT (name) DO UPDATE SET token = s.token
RETURNING permits, token`)
		q.take = fill(`UPDATE {table} SET permits = $1, token = {greatest}(token + 1, {now_us}) WHERE name = $2 RETURNING token`)
		if d == SQLite {
			q.peek = fill(`SELECT s.permits, COUNT(h.owner), COALESCE(SUM(h.permits), 0), COALESCE(MIN(h.expires_at) - {now_ms}, 0),
	` + lockLive + ` OR ` + rwLive + `
FROM {table} AS s LEFT JOIN {holders} AS h ON h.name = s.name AND h.expires_at > {now_ms}
WHERE s.name = $1 GROUP BY s.permits`)
		}
	case MySQL:
		q.ensure = fill(`INSERT INTO {table} (name, permits, token) VALUES ($1, $2, 0) ON DUPLICATE KEY UPDATE token = token`)
		q.locked = fill(`SELECT permits, token FROM {table} WHERE name = $1 FOR UPDATE`)
		q.take = fill(`UPDATE {table} SET permits = $1, token = LAST_INSERT_ID(GREATEST(token + 1, {now_us})) WHERE name = $2`)
		q.renew = fill(`UPDATE {holders} SET expires_at = LAST_INSERT_ID({now_ms} + $1) WHERE name = $2 AND owner = $3 AND expires_at > {now_ms}`)
	}
	if d == Postgres {
		// The acquisition in one round trip: the transaction's statements
		// in a function. Each statement of a READ COMMITTED function sees
		// what was committed before it began, so after the upsert has
		// locked the name's row the count sees every earlier holder.
		// It first marks the name's row of the lock table as a
		// semaphore's (modes.go); other_mode says when that row was not
		// its to mark.
		q.migrate = append(q.migrate, fill(`CREATE OR REPLACE FUNCTION {table}_acquire_v2(
	p_name TEXT, p_permits INTEGER, p_count INTEGER, p_owner TEXT, p_ttl BIGINT,
	OUT token BIGINT, OUT holder_ms BIGINT, OUT held_with INTEGER, OUT other_mode BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
	s_permits INTEGER;
	n_holders BIGINT;
	n_used    BIGINT;
	first_end BIGINT;
	claimed   INTEGER;
BEGIN
	token := NULL; holder_ms := 0; held_with := 0; other_mode := false;
	`+strings.NewReplacer("{name}", "p_name", "{mark}", "'{sem_mark}'").Replace(claimSQL)+` INTO claimed;
	IF claimed IS NULL THEN
		other_mode := true;
		RETURN;
	END IF;
	INSERT INTO {table} AS s (name, permits, token) VALUES (p_name, p_permits, 0)
	ON CONFLICT (name) DO UPDATE SET token = s.token
	RETURNING s.permits INTO s_permits;
	DELETE FROM {holders} WHERE name = p_name AND expires_at <= {now_ms};
	SELECT COUNT(*), COALESCE(SUM(h.permits), 0), COALESCE(MIN(h.expires_at) - {now_ms}, 0)
	INTO n_holders, n_used, first_end FROM {holders} AS h WHERE h.name = p_name;
	IF n_holders > 0 AND s_permits <> p_permits THEN
		held_with := s_permits;
		RETURN;
	END IF;
	IF n_used + p_count > p_permits THEN
		holder_ms := GREATEST(first_end, 1);
		RETURN;
	END IF;
	UPDATE {table} AS s SET permits = p_permits, token = GREATEST(s.token + 1, {now_us})
	WHERE s.name = p_name RETURNING s.token INTO token;
	INSERT INTO {holders} (name, owner, permits, token, expires_at)
	VALUES (p_name, p_owner, p_count, token, {now_ms} + p_ttl);
END
$$`))
		q.acquireFn = fill(`SELECT token, holder_ms, held_with, other_mode FROM {table}_acquire_v2($1, $2, $3, $4, $5)`)
	}
	switch d {
	case Postgres:
		q.release = fill(`WITH released AS (
	DELETE FROM {holders} WHERE name = $1 AND owner = $2 AND expires_at > {now_ms} RETURNING name, ` + noFlush + `
) SELECT 1 FROM released, LATERAL (SELECT pg_notify('{channel}', $3)) AS n`)
		q.batch = fill(`UPDATE {holders} AS l SET expires_at = {now_ms} + v.ttl
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(name, owner, ttl)
WHERE l.name = v.name AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING l.owner`)
	case SQLite:
		q.release = fill(`DELETE FROM {holders} WHERE name = $1 AND owner = $2 AND expires_at > {now_ms}`)
		q.batch = fill(`UPDATE {holders} AS l SET expires_at = {now_ms} + v.ttl
FROM (SELECT json_extract(value, '$[0]') AS name, json_extract(value, '$[1]') AS owner,
	json_extract(value, '$[2]') AS ttl FROM json_each($1)) AS v
WHERE l.name = v.name AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING owner`)
	case MySQL:
		q.release = fill(`DELETE FROM {holders} WHERE name = $1 AND owner = $2 AND expires_at > {now_ms}`)
	}
	return q
}

// semBackend is the semaphore.Backend on the two tables.
type semBackend struct {
	db      sqlconn.DB
	dialect Dialect
	q       semQueries
	modes   string // modeQuery's: "" where modes are not checked
	marks   marks  // the other modes' marks (modes.go; PostgreSQL, MySQL)
}

// semBatchBackend adds batch renewal (PostgreSQL, SQLite).
type semBatchBackend struct{ *semBackend }

// watchingSemBackend adds LISTEN/NOTIFY wake-ups (PostgreSQL through pgx).
type watchingSemBackend struct {
	semBatchBackend
	ln *listener
}

var (
	_ semaphore.Backend        = (*semBackend)(nil)
	_ semaphore.Inspector      = (*semBackend)(nil)
	_ semaphore.BatchRenewer   = semBatchBackend{}
	_ semaphore.ReleaseWatcher = watchingSemBackend{}
)

var errPermitNotHeld = lockerr.NotHeld("sqllock: the permit expired or was revoked")

// acquired is an acquisition's outcome. A refusal (too few free permits, a
// count mismatch) found by the transaction still commits it, which dropped
// the holders whose lease had ended.
type acquired struct {
	token     uint64
	holderTTL time.Duration
	err       error
	other     bool // the name's lock row was not ours to mark (modes.go)
}

func (b *semBackend) TryAcquire(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	if b.q.acquireFn != "" {
		return b.acquireInOne(ctx, r, owner, ttl)
	}
	var a acquired
	if b.q.peek != "" {
		refused, err := b.peek(ctx, r, &a)
		if err != nil {
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
		if refused {
			return 0, a.holderTTL, a.err
		}
	}
	var err error
	remarked := false
	for try := 1; ; try++ {
		err = b.tryAcquire(ctx, r, owner, ttl, &a)
		if err == nil && a.other && !remarked {
			// The name's lock row was not ours to mark: a lock holds it,
			// or another mode marked it (modes.go).
			remarked = true
			if err = b.marks.remarkFor(ctx, b.db, r.Name, semMark); err == nil {
				continue
			}
			var me *lock.ModeError
			if errors.As(err, &me) || errors.Is(err, lock.ErrNotAcquired) {
				return 0, 0, err
			}
			break
		}
		if err == nil && a.other {
			return 0, 0, lock.ErrNotAcquired
		}
		if !errors.Is(err, sqldialect.ErrRetry) || try == maxTxTries || ctx.Err() != nil {
			break
		}
		// Two first acquisitions of a new name can deadlock on MySQL
		// creating its row; the database rolled one back.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Duration(try) * time.Millisecond))))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	return a.token, a.holderTTL, a.err
}

// acquireInOne is TryAcquire through the PostgreSQL function: one round
// trip.
func (b *semBackend) acquireInOne(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	var (
		token            sql.NullInt64
		holderMs, heldBy int64
		other            bool
	)
	for try := 0; ; try++ {
		if _, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.acquireFn, r.Name, r.Permits, r.Count, owner, ttl.Milliseconds()), &token, &holderMs, &heldBy, &other); err != nil {
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
		if !other {
			break
		}
		// The name's lock row was not ours to mark: a lock holds it, or
		// another mode marked it (modes.go).
		err := b.marks.remarkFor(ctx, b.db, r.Name, semMark)
		if err != nil || try > 0 {
			if err == nil {
				err = lock.ErrNotAcquired
			}
			var me *lock.ModeError
			if errors.As(err, &me) || errors.Is(err, lock.ErrNotAcquired) {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
	}
	switch {
	case token.Valid:
		return uint64(token.Int64), 0, nil
	case heldBy > 0:
		return 0, 0, &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: int(heldBy)}
	}
	return 0, time.Duration(holderMs) * time.Millisecond, lock.ErrNotAcquired
}

// txOptions are an acquisition's transaction's: READ COMMITTED on MySQL,
// which takes no gap locks (those would make transactions on neighbouring
// names deadlock); the server's default elsewhere.
func (b *semBackend) txOptions() *sql.TxOptions {
	if b.dialect == MySQL {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// maxTxTries bounds the runs of an acquisition's transaction that the
// database rolled back for a conflict.
const maxTxTries = 8

// tryAcquire runs one acquisition's transaction, with its outcome in a.
func (b *semBackend) tryAcquire(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration, a *acquired) error {
	return sqldialect.Retryable(sqlconn.InTx(ctx, b.db, b.txOptions(), func(tx sqlconn.Tx) error {
		*a = acquired{}
		permits, err := b.ensureIn(ctx, tx, r, a)
		if err != nil || a.other {
			return err
		}
		if err := otherMode(ctx, tx, b.modes, r.Name, lock.ModeSemaphore); err != nil {
			var me *lock.ModeError
			if errors.As(err, &me) {
				a.err = me
				return nil
			}
			return err
		}
		if err := b.checkRoomIn(ctx, tx, r, permits, a); err != nil || a.err != nil {
			return err
		}
		next, err := b.nextTokenIn(ctx, tx, r)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, b.q.add, r.Name, owner, r.Count, next, ttl.Milliseconds()); err != nil {
			return err
		}
		a.token = uint64(next)
		return nil
	}))
}

// ensureIn makes r's semaphore row in tx if it is missing, locks it, and
// returns the N it was made with. On MySQL it first claims the name's lock
// row for semaphores (modes.go); a name held in another mode sets a.other.
func (b *semBackend) ensureIn(ctx context.Context, tx sqlconn.Tx, r semaphore.Request, a *acquired) (permits int64, err error) {
	var token int64
	if b.dialect != MySQL {
		_, err := sqlconn.ScanOne(tx.QueryRow(ctx, b.q.ensure, r.Name, r.Permits), &permits, &token)
		return permits, err
	}
	claimed, err := b.marks.claimIn(ctx, tx, r.Name, semMark)
	if err != nil {
		return 0, err
	}
	if !claimed {
		a.other = true
		return 0, nil
	}
	if _, err := tx.Exec(ctx, b.q.ensure, r.Name, r.Permits); err != nil {
		return 0, err
	}
	_, err = sqlconn.ScanOne(tx.QueryRow(ctx, b.q.locked, r.Name), &permits, &token)
	return permits, err
}

// peek is SQLite's look at r's holders before the acquisition's
// transaction, a read that waits for no writer: it returns true, with the
// refusal in a, when the live holders leave r no room or hold the name with
// another N. SQLite lets one writer in at a time and its busy handler
// retries a waiting writer every 100 ms, in no order, so fresh writers get
// in first: waiters polling a full semaphore (every 10 ms at most) with a
// write transaction each kept the write lock so busy that a holder's
// renewal waited past its lease's deadline. A name that is free, not yet
// known, or held in another mode goes to the transaction, which decides
// again, and reports the other mode first.
func (b *semBackend) peek(ctx context.Context, r semaphore.Request, a *acquired) (bool, error) {
	var (
		permits, holders, used, firstEnds int64
		otherMode                         bool
	)
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.peek, r.Name), &permits, &holders, &used, &firstEnds, &otherMode)
	if err != nil || !ok || otherMode {
		return false, err
	}
	room(r, permits, holders, used, firstEnds, a)
	return a.err != nil, nil
}

// checkRoomIn counts r's live holders in tx, purging the ended ones, and
// sets a.err when r cannot get in (see room).
func (b *semBackend) checkRoomIn(ctx context.Context, tx sqlconn.Tx, r semaphore.Request, permits int64, a *acquired) error {
	var holders, used, firstEnds, ended int64
	if _, err := sqlconn.ScanOne(tx.QueryRow(ctx, b.q.count, r.Name, r.Name), &holders, &used, &firstEnds, &ended); err != nil {
		return err
	}
	if ended > 0 {
		if _, err := tx.Exec(ctx, b.q.purge, r.Name); err != nil {
			return err
		}
	}
	room(r, permits, holders, used, firstEnds, a)
	return nil
}

// room sets a.err when r cannot get in beside holders live holders, of
// used permits in all, who agreed on N = permits, the first lease ending in
// firstEnds ms: a *semaphore.MismatchError for another N, ErrNotAcquired
// (with the first holder's time left) for no room.
func room(r semaphore.Request, permits, holders, used, firstEnds int64, a *acquired) {
	switch {
	case holders > 0 && permits != int64(r.Permits):
		a.err = &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: int(permits)}
	case used+int64(r.Count) > int64(r.Permits):
		a.holderTTL = time.Duration(max(firstEnds, 1)) * time.Millisecond
		a.err = lock.ErrNotAcquired
	}
}

// nextTokenIn takes r's next token in tx.
func (b *semBackend) nextTokenIn(ctx context.Context, tx sqlconn.Tx, r semaphore.Request) (int64, error) {
	if b.dialect == MySQL {
		return sqlconn.LastID(tx.Exec(ctx, b.q.take, r.Permits, r.Name))
	}
	var next int64
	_, err := sqlconn.ScanOne(tx.QueryRow(ctx, b.q.take, r.Permits, r.Name), &next)
	return next, err
}

func (b *semBackend) Renew(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) error {
	var n int64
	var err error
	if b.dialect == MySQL {
		n, err = sqlconn.LastID(b.db.Exec(ctx, b.q.renew, ttl.Milliseconds(), r.Name, owner))
	} else {
		n, err = sqlconn.Affected(b.db.Exec(ctx, b.q.renew, ttl.Milliseconds(), r.Name, owner))
	}
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if n == 0 {
		return errPermitNotHeld
	}
	return nil
}

func (b *semBackend) Release(ctx context.Context, r semaphore.Request, owner string) error {
	return b.release(ctx, r.Name, owner)
}

// release gives back owner's permits of name.
func (b *semBackend) release(ctx context.Context, name, owner string) error {
	var ok bool
	var err error
	if b.dialect == Postgres {
		var one any
		ok, err = sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.release, name, owner, keyHash(name)), &one)
	} else {
		var n int64
		n, err = sqlconn.Affected(b.db.Exec(ctx, b.q.release, name, owner))
		ok = n > 0
	}
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if !ok {
		return errPermitNotHeld
	}
	return nil
}

// RenewBatch implements semaphore.BatchRenewer: one statement per maxBatch
// permits.
func (b semBatchBackend) RenewBatch(ctx context.Context, batch []semaphore.Renewal) []error {
	errs := make([]error, len(batch))
	for start := 0; start < len(batch); start += maxBatch {
		chunk := batch[start:min(start+maxBatch, len(batch))]
		names, owners, ttls := make([]string, len(chunk)), make([]string, len(chunk)), make([]int64, len(chunk))
		for i, r := range chunk {
			names[i], owners[i], ttls[i] = r.Name, r.Owner, r.TTL.Milliseconds()
		}
		var args []any
		if b.dialect == Postgres {
			args = []any{names, owners, ttls}
		} else {
			triples := make([][3]any, len(chunk))
			for i := range chunk {
				triples[i] = [3]any{names[i], owners[i], ttls[i]}
			}
			js, _ := json.Marshal(triples) // strings and numbers only
			args = []any{string(js)}
		}
		renewed, err := sqlconn.Strings(ctx, b.db, b.q.batch, args...)
		got := make(map[string]bool, len(renewed))
		for _, o := range renewed {
			got[o] = true
		}
		for i, r := range chunk {
			switch {
			case err != nil:
				errs[start+i] = fmt.Errorf("sqllock: %w", err)
			case !got[r.Owner]:
				errs[start+i] = errPermitNotHeld
			}
		}
	}
	return errs
}

// WatchRelease implements semaphore.ReleaseWatcher: a release wakes the
// waiters of every count.
func (b watchingSemBackend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return b.ln.WatchRelease(ctx, name)
}

// Close stops the LISTEN connection.
func (b watchingSemBackend) Close() error {
	b.ln.close()
	return nil
}

// InspectSemaphore implements semaphore.Inspector.
func (b *semBackend) InspectSemaphore(ctx context.Context, name string) (semaphore.Info, error) {
	info, _, err := b.inspect(ctx, name)
	return info, err
}

// inspect is InspectSemaphore that also returns each holder's owner.
func (b *semBackend) inspect(ctx context.Context, name string) (semaphore.Info, []string, error) {
	info := semaphore.Info{Name: name}
	var owners []string
	var permits, token int64
	if _, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.last, name), &permits, &token); err != nil {
		return info, nil, fmt.Errorf("sqllock: %w", err)
	}
	info.LastToken = uint64(max(token, 0))
	err := sqlconn.Each(ctx, b.db, b.q.info, []any{name}, func(scan func(...any) error) error {
		var (
			owner       string
			count       int
			tok, leftMs int64
		)
		if err := scan(&owner, &count, &tok, &leftMs); err != nil {
			return err
		}
		_, label, _ := lock.ParseOwner(owner)
		info.Used += count
		info.Holders = append(info.Holders, semaphore.HolderInfo{
			Holder: label, Token: uint64(tok), Count: count, TimeLeft: time.Duration(leftMs) * time.Millisecond,
		})
		owners = append(owners, owner)
		return nil
	})
	if err != nil {
		return info, nil, fmt.Errorf("sqllock: %w", err)
	}
	if len(info.Holders) > 0 {
		info.Permits = int(permits)
	}
	return info, owners, nil
}
