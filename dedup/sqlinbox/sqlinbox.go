// Package sqlinbox is the transactional inbox: a message's id is inserted in
// the same database transaction as the handler's business writes, so the
// effect and the dedup record commit together or roll back together. There
// is no window in which one exists without the other, and no processing TTL:
// the claim is the uncommitted row itself, released by a rollback, by the
// database when the consumer's connection dies, or when the transaction
// outlives WithTimeout.
//
// It works through database/sql on PostgreSQL (pgx's stdlib driver,
// github.com/jackc/pgx/v5/stdlib), SQLite (modernc.org/sqlite, opened with
// WAL and a busy timeout: file:PATH?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)),
// and MySQL 8.0 or MariaDB 10.6 and later (github.com/go-sql-driver/mysql,
// InnoDB) under READ COMMITTED or REPEATABLE READ. There the claim is one
// INSERT ... ON DUPLICATE KEY UPDATE that changes nothing on a duplicate and
// says which it was through LAST_INSERT_ID, whatever the client's
// clientFoundRows (INSERT IGNORE would also swallow errors other than the
// duplicate). Message ids are VARBINARY, compared byte for byte.
//
// A copy arriving while the first is processing waits on the id's unique
// index until that transaction ends (PostgreSQL's and InnoDB's row lock;
// SQLite's single writer): after a commit it is a duplicate, after a
// rollback it is processed. A deadlock or lock wait timeout there is an
// error wrapping [ErrRetry]: the message is redelivered. Either way it is never acknowledged before the effect committed
// and never processed twice.
//
// Use [Inbox.Wrap] or [Inbox.Process] to let the inbox run the transaction,
// or [Inbox.Claim] inside a transaction of your own. Call Migrate once at
// start-up and Purge now and then.
//
// On pgx without database/sql, [NewPgx] returns a [PgxInbox], the same inbox
// whose handlers and Claim take a pgx.Tx.
package sqlinbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/options"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// ErrRetry is wrapped into the database's error when the claim failed on a
// deadlock, a lock wait timeout or a serialization failure: nothing was
// recorded; roll back and process the message again (Process and Wrap
// return it, so the broker redelivers). It is the same value as
// sqlfence.ErrRetry and state.ErrRetry.
var ErrRetry = sqldialect.ErrRetry

// DefaultTable is the inbox table when WithTable is not given.
const DefaultTable = "dedup_inbox"

// Execer is what Claim needs of a transaction; *sql.Tx and *sql.Conn fit.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	_ Execer = (*sql.Tx)(nil)
	_ Execer = (*sql.Conn)(nil)
)

// TxHandler processes one message inside the inbox's transaction. Every
// business write must go through tx; a nil error commits them together with
// the message's id, any other error rolls both back.
type TxHandler func(ctx context.Context, tx *sql.Tx, m dedup.Message) error

// Inbox records processed message ids in one table, through database/sql.
// It is safe for concurrent use and holds no goroutines.
type Inbox struct {
	inbox
	db *sql.DB
}

// inbox is what Inbox and PgxInbox share: the table, the options and the
// statements.
type inbox struct {
	db        sqlconn.DB
	dialect   sqldialect.Dialect
	table     string
	retention time.Duration
	timeout   time.Duration
	txOpts    *sql.TxOptions
	observe   dedup.Observer // nil: none

	claimQ, purgeQ string
	migrations     []string
}

// An Option configures New or NewPgx.
type Option func(*inbox)

// WithTable sets the inbox table. Default: "dedup_inbox" ([DefaultTable]). It
// must be a plain identifier, optionally schema-qualified, of at most 53
// bytes without the schema, so that its index, <table>_processed, fits the
// 63 bytes of an identifier too. Give each consumer
// group, or each purpose a message is processed for, its own table.
func WithTable(name string) Option { return func(in *inbox) { in.table = name } }

// WithRetention sets how long Purge keeps an id: a copy arriving within it is
// always a duplicate; rows are deleted only by Purge, so a later copy may
// still be caught. Default: 24 hours (dedup.DefaultRetention).
func WithRetention(d time.Duration) Option { return func(in *inbox) { in.retention = d } }

// WithTimeout bounds the whole transaction Process runs, handler included;
// when it passes, the transaction rolls back and the id is free for a
// redelivery. Default: 1 minute (dedup.DefaultProcessingTTL).
func WithTimeout(d time.Duration) Option { return func(in *inbox) { in.timeout = d } }

// WithTxOptions sets the options of the transactions Process begins (on pgx,
// mapped onto pgx.TxOptions). Default: nil, the database's default isolation
// (READ COMMITTED on PostgreSQL, SERIALIZABLE on SQLite), under which a
// racing copy waits for the first to commit and then sees the id.
func WithTxOptions(o *sql.TxOptions) Option { return func(in *inbox) { in.txOpts = o } }

// WithObserver calls f with every Process call's Event (Outcome, Err,
// Duration; StoreErr stays nil: the inbox row commits with the effect or
// not at all), as dedup.WithObserver does for a Deduper; metrics.Dedup's
// Observer fits. A handler that panics is not reported. Default: none.
func WithObserver(f dedup.Observer) Option { return func(in *inbox) { in.observe = f } }

// New returns an inbox on db. It fails with dedup.ErrInvalid when db is nil,
// the table name is not a plain identifier, a duration is out of range, or
// the dialect cannot be told from the driver. It does not touch the database;
// call Migrate to create the table.
func New(db *sql.DB, opts ...Option) (*Inbox, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", dedup.ErrInvalid)
	}
	d, err := sqldialect.Resolve(sqldialect.Unknown, db)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlinbox: %w", dedup.ErrInvalid, err)
	}
	core, err := newInbox(sqlconn.StdDB(db), d, opts)
	if err != nil {
		return nil, err
	}
	return &Inbox{inbox: core, db: db}, nil
}

// newInbox is New on db, of dialect d.
func newInbox(db sqlconn.DB, d sqldialect.Dialect, opts []Option) (inbox, error) {
	in := inbox{db: db, dialect: d, table: DefaultTable, retention: dedup.DefaultRetention, timeout: dedup.DefaultProcessingTTL}
	options.Apply(&in, opts)
	if err := sqldialect.Table(in.table, indexSuffix); err != nil {
		return in, fmt.Errorf("%w: sqlinbox: %w", dedup.ErrInvalid, err)
	}
	for what, d := range map[string]time.Duration{"retention": in.retention, "timeout": in.timeout} {
		if d < dedup.MinDuration || d > dedup.MaxDuration {
			return in, fmt.Errorf("%w: sqlinbox: %s %v outside [%v, %v]", dedup.ErrInvalid, what, d, dedup.MinDuration, dedup.MaxDuration)
		}
	}
	in.claimQ = in.sql(claimSQL)
	in.purgeQ = in.sql(purgeSQL)
	migs := migrations
	if in.dialect == sqldialect.MySQL {
		in.claimQ, migs = in.sql(mysqlClaimSQL), mysqlMigrations
	}
	for _, m := range migs {
		in.migrations = append(in.migrations, in.sql(m))
	}
	return in, nil
}

// Migrate creates the table and its index if they do not exist. It is
// idempotent. It fails with an error wrapping dedup.ErrInvalid on a server
// older than latchkey supports.
func (in *Inbox) Migrate(ctx context.Context) error { return in.migrate(ctx) }

func (in *inbox) migrate(ctx context.Context) error {
	if err := in.dialect.Migrate(ctx, in.db, "latchkey/dedup/sqlinbox:"+in.table, in.migrations, dedup.ErrInvalid); err != nil {
		return fmt.Errorf("sqlinbox: %w", err)
	}
	return nil
}

// Claim inserts id into the inbox inside tx and reports whether it is new.
// False means a transaction that committed the same id already processed the
// message: skip the business writes. If another open transaction inserted id,
// Claim waits until it ends. The row commits or rolls back with tx. It
// returns dedup.ErrInvalidID for a bad id, an error wrapping ErrRetry on a
// deadlock or lock wait timeout, or the database's error.
func (in *Inbox) Claim(ctx context.Context, tx Execer, id string) (bool, error) {
	return in.claim(ctx, tx.ExecContext, id)
}

// exec is a transaction's way to run a statement.
type exec func(ctx context.Context, query string, args ...any) (sql.Result, error)

func (in *inbox) claim(ctx context.Context, run exec, id string) (bool, error) {
	if err := dedup.CheckID(id); err != nil {
		return false, err
	}
	r, err := run(ctx, in.claimQ, id)
	if err != nil {
		return false, sqldialect.Retryable(err)
	}
	var n int64
	if in.dialect == sqldialect.MySQL {
		n, err = r.LastInsertId() // 1 inserted, 0 duplicate: see mysqlClaimSQL
	} else {
		n, err = r.RowsAffected()
	}
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// Wrap returns h as a dedup.Handler for any broker adapter: nil for a
// processed message and for a duplicate (acknowledge), h's error or the
// database's otherwise (redeliver).
func (in *Inbox) Wrap(h TxHandler) dedup.Handler {
	return func(ctx context.Context, m dedup.Message) error {
		_, err := in.Process(ctx, m, h)
		return err
	}
}

// Process runs h and the insertion of m.ID in one transaction, bounded by
// WithTimeout:
//
//   - Processed, nil: committed together.
//   - Duplicate, nil: the id was committed before; h did not run.
//   - Failed, h's error: rolled back together; a redelivery is processed.
//   - Rejected, an error: dedup.ErrInvalidID, dedup.ErrInvalid, ctx's error
//     or the database's (a failed commit included: whether it committed is
//     settled by the redelivery, which finds the id or not).
//
// If h panics, the transaction rolls back and the panic goes on.
func (in *Inbox) Process(ctx context.Context, m dedup.Message, h TxHandler) (dedup.Outcome, error) {
	if h == nil {
		return in.observed(ctx, nilHandler)
	}
	return in.observed(ctx, func(ctx context.Context) (dedup.Outcome, error) {
		return in.process(ctx, m, func(ctx context.Context) (sqlconn.Tx, func() error, error) {
			tx, err := in.db.BeginTx(ctx, in.txOpts)
			if err != nil {
				return nil, nil, err
			}
			return sqlconn.StdTx(tx), func() error { return h(ctx, tx, m) }, nil
		})
	})
}

// nilHandler is Process with no handler.
func nilHandler(context.Context) (dedup.Outcome, error) {
	return dedup.OutcomeRejected, fmt.Errorf("%w: nil handler", dedup.ErrInvalid)
}

// observed runs process and tells WithObserver's function how it ended.
func (in *inbox) observed(ctx context.Context, process func(context.Context) (dedup.Outcome, error)) (dedup.Outcome, error) {
	if in.observe == nil {
		return process(ctx)
	}
	start := time.Now()
	o, err := process(ctx)
	in.observe(ctx, dedup.Event{Outcome: o, Err: err, Duration: time.Since(start)})
	return o, err
}

// begin starts Process's transaction, bounded by ctx, and returns it with
// the handler bound to it in the driver's own type.
type begin func(ctx context.Context) (tx sqlconn.Tx, handle func() error, err error)

// process is Process: claim, handle, commit, in the transaction begin
// starts.
func (in *inbox) process(ctx context.Context, m dedup.Message, start begin) (dedup.Outcome, error) {
	if err := dedup.CheckID(m.ID); err != nil {
		return dedup.OutcomeRejected, err
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	tx, handle, err := start(ctx)
	if err != nil {
		return dedup.OutcomeRejected, err
	}
	defer sqlconn.Rollback(ctx, tx) // after Commit: nothing to undo
	fresh, err := in.claim(ctx, tx.Exec, m.ID)
	if err != nil {
		return dedup.OutcomeRejected, err
	}
	if !fresh {
		return dedup.OutcomeDuplicate, nil
	}
	if err := handle(); err != nil {
		return dedup.OutcomeFailed, err
	}
	if err := tx.Commit(ctx); err != nil {
		return dedup.OutcomeRejected, fmt.Errorf("sqlinbox: commit: %w", err)
	}
	return dedup.OutcomeProcessed, nil
}

// Purge deletes the ids processed longer ago than the retention and reports
// how many went.
func (in *Inbox) Purge(ctx context.Context) (int64, error) { return in.purge(ctx) }

func (in *inbox) purge(ctx context.Context) (int64, error) {
	return sqlconn.Affected(in.db.Exec(ctx, in.purgeQ, in.retention.Milliseconds()))
}

// indexSuffix names the table's purge index, after the table.
const indexSuffix = "_processed"

// sql fills in a statement template: {t} the table, {i} its index name.
func (in *inbox) sql(q string) string {
	return in.dialect.Fill(q, "{t}", in.table, "{i}", sqldialect.Bare(in.table)+indexSuffix)
}

var migrations = []string{
	`CREATE TABLE IF NOT EXISTS {t} (
	msg_id       TEXT   NOT NULL PRIMARY KEY,
	processed_ms BIGINT NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {i} ON {t} (processed_ms)`,
}

const (
	claimSQL = `INSERT INTO {t} (msg_id, processed_ms) VALUES ($1, {now_ms}) ON CONFLICT (msg_id) DO NOTHING`
	purgeSQL = `DELETE FROM {t} WHERE processed_ms < {now_ms} - $1`
)

// MySQL and MariaDB: the index inside CREATE TABLE (MySQL 8.0 has no CREATE
// INDEX IF NOT EXISTS), and the claim as ON DUPLICATE KEY UPDATE that keeps
// the row as it is. Its VALUES row sets LAST_INSERT_ID to 1, the duplicate
// branch to 0.
var mysqlMigrations = []string{
	`CREATE TABLE IF NOT EXISTS {t} (
	msg_id       VARBINARY(1024) NOT NULL PRIMARY KEY,
	processed_ms BIGINT          NOT NULL,
	INDEX {i} (processed_ms)
) ENGINE=InnoDB`,
}

const mysqlClaimSQL = `INSERT INTO {t} (msg_id, processed_ms) VALUES ($1, {now_ms} + LAST_INSERT_ID(1) - 1)
ON DUPLICATE KEY UPDATE processed_ms = processed_ms + LAST_INSERT_ID(0)`
