package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// DefaultRWTable is the read-write locks' table unless WithTable says
// otherwise; their holders live in <table>_holders.
const DefaultRWTable = "latchkey_rwlocks"

// NewRW returns a read-write Locker (package rwlock) on db, a database/sql
// handle for PostgreSQL or SQLite (Detect tells which from the driver), and
// creates its two tables if they do not exist: <table> (WithTable; default
// "latchkey_rwlocks") holds one row per name with its last fencing token,
// <table>_holders one row per holder (mode 'r' or 'w') and per waiting
// writer's intent (mode 'i'), with its end by the database's clock.
//
// On PostgreSQL an attempt is one transaction of two statements, sent
// together through pgx: the first locks the name's row, so attempts on one
// name are serialised, and the second, whose snapshot comes after that
// lock, takes the token and records the hold only if no live hold or intent
// keeps the owner out (under READ COMMITTED one statement could not: its
// check would read a snapshot from before the lock). On SQLite, which has
// one writer at a time, an attempt looks first and then takes the name in
// one transaction. The token is max(last + 1, database time in µs). Waiters
// poll (every few ms); use NewPgxRW for LISTEN/NOTIFY wake-ups on
// PostgreSQL. MySQL is not supported yet. Errors wrap lock.ErrInvalid for a
// nil db, an unsupported dialect, a bad table name or a server older than
// latchkey supports.
func NewRW(ctx context.Context, db *sql.DB, d Dialect, opts ...Option) (*rwlock.Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *sql.DB", lock.ErrInvalid)
	}
	if d == Detect {
		d = sqldialect.Detect(db)
	}
	return newRW(ctx, sqlconn.StdDB(db), d, nil, opts)
}

// NewPgxRW is NewRW on a pgx pool for PostgreSQL: waiters are woken by
// NOTIFY on <table>_released when a writer, a reader or a waiting writer
// leaves, through one LISTEN connection per Locker. Close the Locker when
// done.
func NewPgxRW(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*rwlock.Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *pgxpool.Pool", lock.ErrInvalid)
	}
	return newRW(ctx, pgxconn.Pool(pool), Postgres, pool, opts)
}

// rwQueries are the statements of the read-write locks for one dialect.
type rwQueries struct {
	migrate []string
	head    string // $1 name -> last token; locks the name's row
	state   string // $1 name -> mode, live, count, longest ms left
	purge   string // $1 name: deletes ended holds and intents
	hold    string // $1 name, $2 owner, $3 mode, $4 ms, $5 token
	renew   string // $1 name, $2 owner, $3 mode, $4 ms -> rows
	release string // $1 name, $2 owner, $3 mode -> rows
	notify  string // $1 key hash (PostgreSQL)
	inspect string // $1 name -> owner, mode, ms left, token of live holds and intents
	last    string // $1 name -> last token
	// takeIf (PostgreSQL) takes the name in one statement if no live hold
	// or intent keeps the owner out: $1 name, $2 owner, $3 mode, $4 ms ->
	// the token, no row if kept out. It must run after head in the same
	// transaction: its snapshot, taken after head locked the name's row,
	// sees every hold committed before.
	takeIf string
	// takeIfFree (SQLite) raises and returns the name's token if no live
	// hold or intent keeps a newcomer in mode $2 out: $1 name -> the
	// token, no row if kept out.
	takeIfFree string
	// releaseNotify (PostgreSQL) is release plus the NOTIFY, in one
	// statement: $1 name, $2 owner, $3 mode, $4 key hash -> a row if released.
	releaseNotify string
	list          string // names with live holds: listNamesSQL's arguments
}

func newRWQueries(d Dialect, table string) (rwQueries, error) {
	if d != Postgres && d != SQLite {
		return rwQueries{}, fmt.Errorf("read-write locks need PostgreSQL or SQLite, not %v", d)
	}
	if err := sqldialect.Ident("table", table, "_holders"); err != nil {
		return rwQueries{}, err
	}
	if err := sqldialect.Ident("table", table, channelSuffix); err != nil {
		return rwQueries{}, err
	}
	fill := func(q string) string {
		return d.Fill(q, "{table}", table, "{holders}", table+"_holders", "{channel}", table+channelSuffix,
			"{locks}", DefaultTable, "{rw_mark}", rwMark)
	}
	return rwQueries{
		list: listNamesSQL(d, fill, " AND mode <> 'i'"),
		migrate: []string{
			fill(`CREATE TABLE IF NOT EXISTS {table} (
	name  TEXT PRIMARY KEY,
	token BIGINT NOT NULL
)`),
			fill(`CREATE TABLE IF NOT EXISTS {holders} (
	name       TEXT NOT NULL,
	owner      TEXT NOT NULL,
	mode       CHAR(1) NOT NULL,
	expires_at BIGINT NOT NULL,
	token      BIGINT NOT NULL,
	PRIMARY KEY (name, owner)
)`),
		},
		head: fill(`INSERT INTO {table} AS h (name, token) VALUES ($1, 0)
ON CONFLICT (name) DO UPDATE SET token = h.token
RETURNING token`),
		state: fill(`SELECT mode, CASE WHEN expires_at > {now_ms} THEN 1 ELSE 0 END, COUNT(*), MAX(expires_at) - {now_ms}
FROM {holders} WHERE name = $1 GROUP BY 1, 2`),
		purge: fill(`DELETE FROM {holders} WHERE name = $1 AND expires_at <= {now_ms}`),
		hold: fill(`INSERT INTO {holders} AS x (name, owner, mode, expires_at, token) VALUES ($1, $2, $3, {now_ms} + $4, $5)
ON CONFLICT (name, owner) DO UPDATE SET mode = excluded.mode, expires_at = excluded.expires_at, token = excluded.token`),
		renew:   fill(`UPDATE {holders} SET expires_at = {now_ms} + $4 WHERE name = $1 AND owner = $2 AND mode = $3 AND expires_at > {now_ms}`),
		release: fill(`DELETE FROM {holders} WHERE name = $1 AND owner = $2 AND mode = $3 AND expires_at > {now_ms}`),
		notify:  fill(`SELECT pg_notify('{channel}', $1)`),
		inspect: fill(`SELECT owner, mode, expires_at - {now_ms}, token FROM {holders} WHERE name = $1 AND expires_at > {now_ms}`),
		last:    fill(`SELECT token FROM {table} WHERE name = $1`),
		takeIf: fill(`WITH t AS (
	UPDATE {table} SET token = {greatest}(token + 1, {now_us})
	WHERE name = $1 AND NOT EXISTS (
		SELECT 1 FROM {holders} WHERE name = $1 AND expires_at > {now_ms}
		AND (mode = 'w' OR (mode = 'i' AND $3::text = 'r') OR (mode = 'r' AND $3::text = 'w')))
	AND EXISTS (SELECT 1 FROM {locks} WHERE key = $1 AND owner = '{rw_mark}') -- claimed (modes.go)
	RETURNING token
)
INSERT INTO {holders} AS x (name, owner, mode, expires_at, token)
SELECT $1, $2, $3, {now_ms} + $4, token FROM t
ON CONFLICT (name, owner) DO UPDATE SET mode = excluded.mode, expires_at = excluded.expires_at, token = excluded.token
RETURNING token`),
		takeIfFree: fill(`INSERT INTO {table} AS h (name, token) VALUES ($1, {now_us})
ON CONFLICT (name) DO UPDATE SET token = {greatest}(h.token + 1, excluded.token)
WHERE NOT EXISTS (
	SELECT 1 FROM {holders} WHERE name = $1 AND expires_at > {now_ms}
	AND (mode = 'w' OR (mode = 'i' AND $2 = 'r') OR (mode = 'r' AND $2 = 'w')))
RETURNING token`),
		releaseNotify: fill(`WITH gone AS (
	DELETE FROM {holders} WHERE name = $1 AND owner = $2 AND mode = $3 AND expires_at > {now_ms}
	RETURNING ` + noFlush + `
) SELECT 1 FROM gone, LATERAL (SELECT pg_notify('{channel}', $4)) AS n`),
	}, nil
}

// rwBackend is rwlock.Backend on the two tables.
type rwBackend struct {
	db       sqlconn.DB
	pool     *pgxpool.Pool // PostgreSQL through pgx: attempts are pipelined
	dialect  Dialect
	q        rwQueries
	listener *listener // nil unless PostgreSQL through pgx
	modes    string    // modeQuery's: "" where modes are not checked
	marks    marks     // the other modes' marks (modes.go; PostgreSQL)
}

var (
	_ rwlock.Backend   = (*rwBackend)(nil)
	_ rwlock.Inspector = (*rwBackend)(nil)
)

func newRW(ctx context.Context, db sqlconn.DB, d Dialect, pool *pgxpool.Pool, opts []Option) (*rwlock.Locker, error) {
	o := optionsOf(DefaultRWTable, opts)
	q, err := newRWQueries(d, o.table)
	if err != nil {
		return nil, fmt.Errorf("%w: sqllock: %w", lock.ErrInvalid, err)
	}
	if err := setUp(ctx, db, d, q.migrate, "table "+o.table); err != nil {
		return nil, err
	}
	b := &rwBackend{db: db, pool: pool, dialect: d, q: q, modes: modeQuery(d), marks: newMarks(d)}
	if pool == nil {
		return rwlock.New(b)
	}
	b.listener = newListener(poolConns(pool), o.table+channelSuffix)
	return rwlock.New(rwWatching{b})
}

// Close stops the LISTEN connection, if any.
func (b *rwBackend) Close() error {
	if b.listener != nil {
		b.listener.close()
	}
	return nil
}

// modes is what the state query found of a name's holds and intents.
type modes struct {
	writers, readers, intents int
	left                      time.Duration // longest live hold's time left
	ended                     bool          // some hold or intent ended and is still stored
}

func (b *rwBackend) TryAcquire(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	if b.dialect == Postgres {
		return b.tryAcquirePostgres(ctx, name, owner, mode, ttl, intent)
	}
	// A look first, without a transaction: a waiter that finds the name
	// held (the common case while it waits) writes nothing but its intent,
	// which excludes nobody and needs no lock on the name.
	m, err := b.state(ctx, b.db, name)
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if !m.blocks(mode) {
		token, ok, err := b.take(ctx, name, owner, mode, ttl, &m)
		var me *lock.ModeError
		if errors.As(err, &me) {
			return 0, 0, me
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
		if ok {
			return token, 0, nil
		}
	}
	if intent {
		if _, err := b.db.Exec(ctx, b.q.hold, name, owner, "i", rwlock.IntentTTL.Milliseconds(), 0); err != nil {
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
	}
	return 0, m.left, lock.ErrNotAcquired
}

// tryAcquirePostgres is TryAcquire in one transaction of two statements,
// head and takeIf, sent together (one round trip through pgx); only a
// refused attempt reads the holds, to tell how long they have left.
func (b *rwBackend) tryAcquirePostgres(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	token, ok, claimed, err := b.takeIf(ctx, name, owner, modeCode(mode), ttl.Milliseconds())
	if err == nil && !claimed {
		// The name's lock row is not ours to mark: a lock holds it, or
		// another mode marked it (modes.go).
		err = b.marks.remarkFor(ctx, b.db, name, rwMark)
		var me *lock.ModeError
		switch {
		case errors.As(err, &me):
			return 0, 0, me
		case errors.Is(err, lock.ErrNotAcquired):
			return 0, 0, err
		case err == nil:
			token, ok, _, err = b.takeIf(ctx, name, owner, modeCode(mode), ttl.Milliseconds())
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if ok {
		return uint64(token), 0, nil
	}
	if intent {
		if _, err := b.db.Exec(ctx, b.q.hold, name, owner, "i", rwlock.IntentTTL.Milliseconds(), 0); err != nil {
			return 0, 0, fmt.Errorf("sqllock: %w", err)
		}
	}
	m, err := b.state(ctx, b.db, name)
	if err != nil {
		return 0, 0, fmt.Errorf("sqllock: %w", err)
	}
	if m.ended {
		_, _ = b.db.Exec(ctx, b.q.purge, name) // tidying only
	}
	return 0, m.left, lock.ErrNotAcquired
}

// takeIf runs the claim of the name's lock row (modes.go), head, then takeIf
// in one transaction: through pgx all three in one batch, which PostgreSQL
// runs as one implicit transaction (the row locks the claim and head take
// last until takeIf is done), one round trip. claimed is false when the
// lock row was not the read-write lock's to mark; takeIf then takes nothing.
func (b *rwBackend) takeIf(ctx context.Context, name, owner, mode string, ms int64) (token int64, ok, claimed bool, err error) {
	if b.pool == nil {
		err = sqlconn.InTx(ctx, b.db, nil, func(tx sqlconn.Tx) error {
			var err error
			if claimed, err = b.marks.claimIn(ctx, tx, name, rwMark); err != nil {
				return err
			}
			var last int64
			if err := tx.QueryRow(ctx, b.q.head, name).Scan(&last); err != nil {
				return err
			}
			ok, err = sqlconn.ScanOne(tx.QueryRow(ctx, b.q.takeIf, name, owner, mode, ms), &token)
			return err
		})
		return token, ok && err == nil, claimed, err
	}
	var batch pgx.Batch
	batch.Queue(b.marks.claim, name, rwMark)
	batch.Queue(b.q.head, name)
	batch.Queue(b.q.takeIf, name, owner, mode, ms)
	br := b.pool.SendBatch(ctx, &batch)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	var one int64
	switch err := br.QueryRow().Scan(&one); {
	case err == nil:
		claimed = true
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, false, false, err
	}
	var last int64
	if err := br.QueryRow().Scan(&last); err != nil {
		return 0, false, claimed, err
	}
	err = br.QueryRow().Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, claimed, nil
	}
	if err != nil {
		return 0, false, claimed, err
	}
	return token, true, claimed, nil
}

// take takes name in one transaction (SQLite's), whose first statement
// takes the token only if no live hold or intent keeps owner out, and
// whose second records the hold. SQLite runs one writer at a time and a
// write sees the latest data, so the check and the take cannot be
// overtaken. ok is false if owner is kept out; m, what the look before
// found, then still tells how long the holders have left.
func (b *rwBackend) take(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, m *modes) (token uint64, ok bool, err error) {
	tx, err := b.db.Begin(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer func() {
		if err != nil || !ok {
			sqlconn.Rollback(ctx, tx)
		}
	}()
	if m.ended {
		if _, err := tx.Exec(ctx, b.q.purge, name); err != nil {
			return 0, false, err
		}
	}
	var t int64
	got, err := sqlconn.ScanOne(tx.QueryRow(ctx, b.q.takeIfFree, name, modeCode(mode)), &t)
	if err != nil || !got {
		return 0, false, err
	}
	if err := otherMode(ctx, tx, b.modes, name, lock.ModeReadWrite); err != nil {
		return 0, false, err // rolled back
	}
	if _, err := tx.Exec(ctx, b.q.hold, name, owner, modeCode(mode), ttl.Milliseconds(), t); err != nil {
		return 0, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, err
	}
	return uint64(t), true, nil
}

// blocks reports whether holds and intents m keep a newcomer in mode out.
func (m modes) blocks(mode rwlock.Mode) bool {
	return m.writers > 0 || (mode == rwlock.Read && m.intents > 0) || (mode == rwlock.Write && m.readers > 0)
}

// state reads name's holds and intents.
func (b *rwBackend) state(ctx context.Context, tx sqlconn.Querier, name string) (modes, error) {
	var m modes
	err := sqlconn.Each(ctx, tx, b.q.state, []any{name}, func(scan func(...any) error) error {
		var (
			mode      string
			live, n   int
			leftMs    int64
			leftValid sql.NullInt64
		)
		if err := scan(&mode, &live, &n, &leftValid); err != nil {
			return err
		}
		leftMs = leftValid.Int64
		if live == 0 {
			m.ended = true
			return nil
		}
		switch mode {
		case "w":
			m.writers += n
		case "r":
			m.readers += n
		case "i":
			m.intents += n
			return nil // intents keep readers out, but say nothing of when
		}
		m.left = max(m.left, time.Duration(max(leftMs, 1))*time.Millisecond)
		return nil
	})
	return m, err
}

func modeCode(m rwlock.Mode) string {
	if m == rwlock.Read {
		return "r"
	}
	return "w"
}

func (b *rwBackend) Renew(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration) error {
	n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.renew, name, owner, modeCode(mode), ttl.Milliseconds()))
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if n == 0 {
		return errNotHeld
	}
	return nil
}

func (b *rwBackend) Release(ctx context.Context, name, owner string, mode rwlock.Mode) error {
	if b.dialect == Postgres {
		var one int
		ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.releaseNotify, name, owner, modeCode(mode), keyHash(name)), &one)
		if err != nil {
			return fmt.Errorf("sqllock: %w", err)
		}
		if !ok {
			return errNotHeld
		}
		return nil
	}
	n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.release, name, owner, modeCode(mode)))
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if n == 0 {
		return errNotHeld
	}
	b.wake(ctx, name)
	return nil
}

func (b *rwBackend) Withdraw(ctx context.Context, name, owner string) error {
	n, err := sqlconn.Affected(b.db.Exec(ctx, b.q.release, name, owner, "i"))
	if err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if n > 0 {
		b.wake(ctx, name)
	}
	return nil
}

// wake tells other Lockers' waiters that name may be free, on PostgreSQL;
// elsewhere they poll. A lost notification costs only latency.
func (b *rwBackend) wake(ctx context.Context, name string) {
	if b.dialect == Postgres {
		_, _ = b.db.Exec(ctx, b.q.notify, keyHash(name))
	}
}

// rwWatching adds LISTEN/NOTIFY wake-ups to the backend.
type rwWatching struct{ *rwBackend }

var _ rwlock.ReleaseWatcher = rwWatching{}

func (b rwWatching) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return b.listener.WatchRelease(ctx, name)
}

func (b *rwBackend) InspectRW(ctx context.Context, name string) (rwlock.Info, error) {
	var info rwlock.Info
	var last int64
	if _, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.last, name), &last); err != nil {
		return info, err
	}
	info.Token = uint64(last)
	err := sqlconn.Each(ctx, b.db, b.q.inspect, []any{name}, func(scan func(...any) error) error {
		var (
			owner, mode string
			leftMs      int64
			token       int64
		)
		if err := scan(&owner, &mode, &leftMs, &token); err != nil {
			return err
		}
		h := rwlock.Holder{Label: owner, Token: uint64(token), TimeLeft: time.Duration(leftMs) * time.Millisecond}
		switch mode {
		case "w":
			info.Writer = &h
		case "r":
			info.Readers = append(info.Readers, h)
		case "i":
			info.WritersWaiting++
		}
		return nil
	})
	return info, err
}
