package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqlconn/pgxconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// DefaultTable is the lease table's name unless WithTable says otherwise.
const DefaultTable = "latchkey_locks"

// A Locker is a lock.Locker on a SQL lease table. Close it when done: on
// PostgreSQL through pgx it owns the connection waiters LISTEN on.
type Locker struct {
	*lock.Manager
	backend  *backend
	listener *listener           // nil unless PostgreSQL through pgx (a pool, or its database/sql driver)
	prepared *sqlconn.PreparedDB // MySQL's statements, prepared; nil elsewhere
	iq       inspectQueries
	closeOne sync.Once
}

var _ lock.Locker = (*Locker)(nil)

// An Option configures a Locker.
type Option func(*options)

type options struct {
	table      string
	unprepared bool // WithUnpreparedStatements
}

// optionsOf applies opts over the defaults, table the table's name.
func optionsOf(table string, opts []Option) options {
	o := options{table: table}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithTable sets the lease table's name, a plain SQL identifier (letters,
// digits, underscores) short enough that the PostgreSQL channel named after
// it, <table>_released, fits an identifier too: at most 54 bytes, on every
// dialect. Default: "latchkey_locks" ([DefaultTable]).
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithUnpreparedStatements makes a MySQL Locker send its statements as text,
// as before it prepared them: for a server whose max_prepared_stmt_count
// (shared by every client of the server) a fleet of Lockers would use up.
// Each statement then costs the server a parse, and two round trips unless
// the DSN says interpolateParams=true. Other dialects ignore it.
func WithUnpreparedStatements() Option { return func(o *options) { o.unprepared = true } }

// New returns a Locker on db, a database/sql handle for dialect d (Detect
// tells it from the driver), and creates the lease table if it does not
// exist. On PostgreSQL through pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib), waiters are woken by NOTIFY as with
// NewPgx, through one connection of the Locker's own, opened with the
// settings of db's connections while anyone waits (it is not one of db's:
// SetMaxOpenConns does not count it). With lib/pq, and on MySQL
// and SQLite, waiters of other Lockers poll.
//
// On MySQL the Locker prepares its statements, each once on each of db's
// connections it runs on, so that the server neither parses nor plans them
// again, and the driver sends each in one round trip whether or not the DSN
// says interpolateParams=true. They are a handful per connection (four in
// steady use: acquire, release, renewal batch, hand-over; a dozen at most),
// counted against the server's max_prepared_stmt_count, which all its
// clients share; should the server refuse one, it runs unprepared. Close
// closes them. WithUnpreparedStatements turns this off. Errors wrap
// lock.ErrInvalid for a nil db, an unknown dialect, a bad table name or a
// server older than latchkey supports.
func New(ctx context.Context, db *sql.DB, d Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *sql.DB", lock.ErrInvalid)
	}
	if d == Detect {
		d = sqldialect.Detect(db) // newQueries refuses what it cannot tell
	}
	o := optionsOf(DefaultTable, opts)
	var conns connSource
	var prepared *sqlconn.PreparedDB
	switch {
	case d == Postgres:
		conns = stdConns(ctx, db)
	case d == MySQL && !o.unprepared:
		prepared = sqlconn.Prepared(db, sqldialect.Unprepared)
	}
	l, err := newLocker(ctx, sqlconn.StdDB(db), d, conns, prepared, o)
	if err != nil || d != MySQL {
		return l, err
	}
	// MySQL: waiters of different processes take turns (turns.go), named
	// after the database and table, as named locks are the server's.
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT IFNULL(DATABASE(),'')").Scan(&schema); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("sqllock: %w", err)
	}
	l.backend.turns = newTurns(db, schema+"."+o.table, l.backend.q)
	l.Manager, _ = lock.NewManager(turnsBackend{l.backend}) // not nil
	return l, nil
}

// NewPgx returns a Locker on a pgx pool for PostgreSQL and creates the lease
// table if it does not exist. Waiters are woken by NOTIFY on release through
// one LISTEN connection per Locker, taken out of the pool while anyone waits
// and closed 30 seconds after the last wait ends, or at Close.
// Errors wrap lock.ErrInvalid for a nil pool, a bad table name or a server
// older than latchkey supports.
func NewPgx(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: sqllock: nil *pgxpool.Pool", lock.ErrInvalid)
	}
	return newLocker(ctx, pgxconn.Pool(pool), Postgres, poolConns(pool), nil, optionsOf(DefaultTable, opts))
}

// newLocker opens a Locker; conns, if not nil, lends the connection its
// waiters LISTEN on; prepared, if not nil, is db whose statements run
// prepared, for all but the table's set-up.
func newLocker(ctx context.Context, db sqlconn.DB, d Dialect, conns connSource, prepared *sqlconn.PreparedDB, o options) (*Locker, error) {
	q, err := newQueries(d, o.table)
	if err != nil {
		return nil, fmt.Errorf("%w: sqllock: %w", lock.ErrInvalid, err)
	}
	if err := setUp(ctx, db, d, q.migrate, "table "+o.table); err != nil {
		return nil, err
	}
	if err := migrateWaited(ctx, db, q); err != nil {
		return nil, fmt.Errorf("sqllock: table %s: %w", o.table, err)
	}
	b := &backend{db: db, dialect: d, q: q, marks: newMarks(d)}
	if prepared != nil {
		b.db = prepared
	}
	l := &Locker{backend: b, prepared: prepared, iq: newInspectQueries(d, o.table)}
	var lb driver.Backend = b
	if conns != nil {
		l.listener = newListener(conns, o.table+channelSuffix)
		b.waiting = &waiting{}
		lb = watchingBackend{b, l.listener}
	}
	l.Manager, _ = lock.NewManager(lb) // lb is not nil
	return l, nil
}

// Close stops the LISTEN connection, if any, and closes the prepared
// statements (MySQL). Held leases keep being renewed until released, with
// statements unprepared; Close does not release them.
func (l *Locker) Close() error {
	l.closeOne.Do(func() {
		if l.listener != nil {
			l.listener.close()
		}
		if l.backend.turns != nil {
			l.backend.turns.close()
		}
		if l.prepared != nil {
			_ = l.prepared.Close()
		}
	})
	return nil
}

// watchingBackend adds LISTEN/NOTIFY wake-ups to the backend.
type watchingBackend struct {
	*backend
	*listener
}

var _ driver.WaiterWatcher = watchingBackend{}

// turnsBackend adds MySQL's turns (turns.go) to the backend: its waiting
// Acquire calls are woken when their Locker's turn comes, and poll with a
// short backoff while it holds the turn.
type turnsBackend struct{ *backend }

var (
	_ driver.WaiterWatcher   = turnsBackend{}
	_ driver.BoundedAcquirer = turnsBackend{}
)

// WatchReleaseFor implements driver.WaiterWatcher.
func (b turnsBackend) WatchReleaseFor(_ context.Context, key, owner string) (<-chan struct{}, func(), error) {
	wake, stop := b.turns.watch(key, owner)
	return wake, stop, nil
}

// TryAcquirePartial implements driver.BoundedAcquirer: a lock the key's turn
// took for a waiting call is collected with what is left of its lease.
func (b turnsBackend) TryAcquirePartial(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	return b.tryAcquireMySQL(ctx, key, owner, ttl, true)
}

// WatchRelease implements driver.ReleaseWatcher, for those who only watch:
// MySQL tells nobody of releases, so they poll.
func (turnsBackend) WatchRelease(context.Context, string) (<-chan struct{}, func(), error) {
	return nil, nil, fmt.Errorf("%w: sqllock: MySQL tells nobody of releases", lock.ErrUnsupported)
}
