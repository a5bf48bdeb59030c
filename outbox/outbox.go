package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// DefaultTable is the outbox table when WithTable is not given.
const DefaultTable = "outbox_messages"

// Dialect is the SQL flavour of the database: Detect, Postgres, SQLite or
// MySQL (MySQL 8.0 and MariaDB 10.6 or later). It is one type across
// latchkey's SQL packages.
type Dialect = sqldialect.Dialect

// The dialects. Detect tells them apart by the *sql.DB's driver.
const Detect, Postgres, SQLite, MySQL = sqldialect.Unknown, sqldialect.Postgres, sqldialect.SQLite, sqldialect.MySQL

// Execer is what Add writes through: the caller's *sql.Tx (or a *sql.Conn
// or *sql.DB, for a message written on its own).
type Execer = sqlconn.StdHandle

// Conn is what AddOn writes through without database/sql: package
// outbox/pgxoutbox makes one of a pgx.Tx, and any driver fits through a
// small adapter. A Row's Scan returns an error wrapping sql.ErrNoRows when
// there is no row; Exec's result needs LastInsertId on MySQL only.
type Conn = sqlconn.Conn

// DB is the pool the relay and Stats run their own transactions on:
// NewOn's argument, with the methods of Conn plus Query and Begin (whose
// Tx has Commit and Rollback). New makes one of a *sql.DB.
type DB = sqlconn.DB

// An Outbox is one outbox table. It is safe for concurrent use and holds no
// goroutines.
type Outbox struct {
	db      DB
	dialect Dialect
	table   string

	nextSeqQ, insertQ, fenceQ, purgeQ string
}

// An Option configures New or NewOn.
type Option func(*config)

type config struct {
	table   string
	dialect Dialect
}

// WithTable sets the outbox table. Default: "outbox_messages"
// (DefaultTable). It must be a plain identifier, optionally
// schema-qualified, of at most 56 bytes without the schema, so that the
// names made from it (<table>_relay, <table>_msg_id) fit an identifier's 63.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithDialect names the database's dialect. Default: Detect, which tells it
// from the *sql.DB's driver; NewOn needs it unless the DB is PostgreSQL's.
func WithDialect(d Dialect) Option { return func(c *config) { c.dialect = d } }

// New returns the outbox on db. It fails with ErrInvalid for a nil db, a bad
// table name or a dialect it cannot tell. It does not touch the database;
// call Migrate to create the tables.
func New(db *sql.DB, opts ...Option) (*Outbox, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalid)
	}
	c := newConfig(opts)
	d, err := sqldialect.Resolve(c.dialect, db)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: pass WithDialect", ErrInvalid, err)
	}
	return newOutbox(sqlconn.StdDB(db), d, c.table)
}

// NewOn returns the outbox on db, a pool of any driver, of the dialect
// WithDialect names (default PostgreSQL). The rest is New's.
func NewOn(db DB, opts ...Option) (*Outbox, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil DB", ErrInvalid)
	}
	c := newConfig(opts)
	if c.dialect == Detect {
		c.dialect = Postgres
	}
	if !c.dialect.Supported() {
		return nil, fmt.Errorf("%w: dialect %v", ErrInvalid, c.dialect)
	}
	return newOutbox(db, c.dialect, c.table)
}

func newConfig(opts []Option) config {
	c := config{table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func newOutbox(db DB, d Dialect, table string) (*Outbox, error) {
	if err := sqldialect.Table(table, keysSuffix, relaySuffix, scanSuffix, orderSuffix, "_msg_id"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	o := &Outbox{db: db, dialect: d, table: table}
	o.nextSeqQ = o.sql(nextSeqSQL)
	if d == MySQL {
		o.nextSeqQ = o.sql(mysqlNextSeqSQL)
	}
	o.insertQ = o.sql(insertSQL)
	o.fenceQ = o.sql(fenceSQL)
	o.purgeQ = o.sql(purgeSQL)
	return o, nil
}

// Table returns the outbox table's name.
func (o *Outbox) Table() string { return o.table }

// Migrate creates the tables and indexes if they do not exist. It is
// idempotent and safe to run from several processes at once. It fails with
// an error wrapping ErrInvalid on a server older than latchkey supports.
func (o *Outbox) Migrate(ctx context.Context) error {
	var stmts []string
	for _, m := range migrations[o.dialect] {
		stmts = append(stmts, o.sql(m))
	}
	if err := o.dialect.Migrate(ctx, o.db, "latchkey/outbox:"+o.table, stmts, ErrInvalid); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Add writes msgs into the outbox inside tx, the caller's transaction, so
// they commit or roll back with its business writes, and returns their ids
// (generated where a message had none). A message with a key takes the
// key's next sequence number and holds its key until tx ends: another
// transaction adding to the same key waits for it.
//
// Errors: one wrapping ErrInvalid for a bad message (nothing is written),
// one wrapping ErrRetry on a deadlock or serialization failure, or the
// database's (an id already in the outbox is its unique violation). After
// an error roll tx back.
func (o *Outbox) Add(ctx context.Context, tx Execer, msgs ...Message) ([]string, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	return o.AddOn(ctx, sqlconn.Std(tx), msgs...)
}

// AddOn is Add through a Conn: a transaction of a driver other than
// database/sql (pgxoutbox.Add uses it).
func (o *Outbox) AddOn(ctx context.Context, c Conn, msgs ...Message) ([]string, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	ids := make([]string, 0, len(msgs))
	rows := make([]row, 0, len(msgs))
	for _, m := range msgs {
		r, err := newRow(m)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
		ids = append(ids, r.id)
	}
	for _, r := range rows {
		if err := o.insert(ctx, c, r); err != nil {
			return nil, sqldialect.Retryable(fmt.Errorf("outbox: add %s: %w", r.id, err))
		}
	}
	return ids, nil
}

// row is a message as Add inserts it.
type row struct {
	id, topic, key string
	payload        []byte
	headers        string
}

func newRow(m Message) (row, error) {
	if err := m.check(); err != nil {
		return row{}, err
	}
	if m.ID == "" {
		id, err := newID()
		if err != nil {
			return row{}, err
		}
		m.ID = id
	}
	h, err := json.Marshal(m.Headers)
	if err != nil {
		return row{}, fmt.Errorf("%w: headers: %w", ErrInvalid, err)
	}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	return row{id: m.ID, topic: m.Topic, key: m.Key, payload: m.Payload, headers: string(h)}, nil
}

// insert takes the key's next number, then inserts the message.
func (o *Outbox) insert(ctx context.Context, c Conn, r row) error {
	var seq sql.NullInt64
	if r.key != "" {
		n, err := o.nextSeq(ctx, c, r.key)
		if err != nil {
			return err
		}
		seq = sql.NullInt64{Int64: n, Valid: true}
	}
	_, err := c.Exec(ctx, o.insertQ, r.id, r.topic, r.key, seq, r.payload, r.headers)
	return err
}

func (o *Outbox) nextSeq(ctx context.Context, c Conn, key string) (int64, error) {
	if o.dialect == MySQL {
		return sqlconn.LastID(c.Exec(ctx, o.nextSeqQ, key))
	}
	var n int64
	err := c.QueryRow(ctx, o.nextSeqQ, key).Scan(&n)
	return n, err
}
