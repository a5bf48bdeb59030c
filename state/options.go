package state

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/options"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Defaults of the options.
const (
	// DefaultKeyColumn identifies a row.
	DefaultKeyColumn = "id"
	// DefaultVersionColumn holds a row's version number (Optimistic).
	DefaultVersionColumn = "version"
	// DefaultAttempts is how many times Optimistic.Update reads, runs fn and
	// tries to write before it gives up with ErrConflict.
	DefaultAttempts = 5
	// DefaultBackoff is the base of the jittered backoff between attempts:
	// before attempt n+1 Update sleeps a random duration in
	// [0, min(DefaultMaxBackoff, DefaultBackoff * 2^(n-1))).
	DefaultBackoff = 5 * time.Millisecond
	// DefaultMaxBackoff caps the backoff between attempts.
	DefaultMaxBackoff = 200 * time.Millisecond
)

// An Option configures NewMachine or NewOptimistic. Options that concern only
// one of them are ignored by the other.
type Option func(*config)

type config struct {
	dialect             Dialect
	key, status         string
	version             string
	attempts            int
	backoff, maxBackoff time.Duration
}

func newConfig(opts []Option) config {
	c := config{key: DefaultKeyColumn, status: DefaultStatusColumn, version: DefaultVersionColumn,
		attempts: DefaultAttempts, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff}
	options.Apply(&c, opts)
	return c
}

// WithKeyColumn names the column identifying a row. Default: "id"
// ([DefaultKeyColumn]).
func WithKeyColumn(name string) Option { return func(c *config) { c.key = name } }

// WithDialect sets the SQL dialect. Default: Detect, from a *sql.DB's
// driver; a Conn has none to tell it by, so NewMachineOn and
// NewOptimisticOn need it.
func WithDialect(d Dialect) Option { return func(c *config) { c.dialect = d } }

// WithStatusColumn names the column holding a Machine's state. Default:
// "status" ([DefaultStatusColumn]).
func WithStatusColumn(name string) Option { return func(c *config) { c.status = name } }

// WithVersionColumn names Optimistic's version column. Default: "version"
// ([DefaultVersionColumn]).
func WithVersionColumn(name string) Option { return func(c *config) { c.version = name } }

// WithAttempts bounds how many times Optimistic.Update tries (read, fn,
// write) before returning ErrConflict; at least 1. Default: 5
// ([DefaultAttempts]).
func WithAttempts(n int) Option { return func(c *config) { c.attempts = n } }

// WithBackoff sets the base and the cap of Optimistic.Update's jittered
// exponential backoff between attempts (full jitter: a uniform random sleep
// below min(max, base * 2^(attempt-1))). Default: 5 ms and 200 ms
// ([DefaultBackoff], [DefaultMaxBackoff]). WithBackoff(0, 0) retries at once.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) { c.backoff, c.maxBackoff = base, max }
}

// newTable checks what both kinds of update share, for a database/sql
// handle.
func newTable(db *sql.DB, name string, c config) (table, error) {
	if db == nil {
		return table{}, fmt.Errorf("%w: nil *sql.DB", ErrInvalid)
	}
	var err error
	if c.dialect, err = sqldialect.Resolve(c.dialect, db); err != nil {
		return table{}, fmt.Errorf("%w: %w; use WithDialect", ErrInvalid, err)
	}
	return newTableOn(sqlconn.Std(db), name, c)
}

// newTableOn checks what both kinds of update share, for a Conn, whose
// dialect WithDialect must name.
func newTableOn(conn Conn, name string, c config) (table, error) {
	t := table{db: conn, name: name, key: c.key, dialect: c.dialect}
	if conn == nil {
		return t, fmt.Errorf("%w: nil Conn", ErrInvalid)
	}
	if !t.dialect.Supported() {
		return t, fmt.Errorf("%w: a Conn's dialect cannot be detected: pass WithDialect", ErrInvalid)
	}
	if err := errors.Join(sqldialect.Table(name), sqldialect.Ident("key column", c.key)); err != nil {
		return t, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return t, nil
}
