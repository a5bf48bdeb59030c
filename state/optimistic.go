package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Into names the columns an optimistic update reads and where to put them:
// column name -> pointer, as for sql.Row.Scan.
type Into map[string]any

// Optimistic updates rows of one table under optimistic concurrency control
// on a version column (BIGINT NOT NULL DEFAULT 0; NULL counts as 0). It is safe
// for concurrent use and holds no connection.
type Optimistic struct {
	t          table
	version    string
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
}

// NewOptimistic returns an Optimistic for table on db. It touches no server.
// Errors wrap ErrInvalid: nil db, names that are not plain identifiers,
// attempts below 1, negative backoff, or a driver whose dialect cannot be told.
func NewOptimistic(db *sql.DB, tableName string, opts ...Option) (*Optimistic, error) {
	c := newConfig(opts)
	t, err := newTable(db, tableName, c)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return newOptimistic(t, c)
}

// NewOptimisticOn is NewOptimistic on a Conn, for drivers other than
// database/sql (state/pgxstate's NewOptimistic calls it with a pgx pool).
// The dialect cannot be detected there: pass WithDialect. Errors wrap
// ErrInvalid, as NewOptimistic's.
func NewOptimisticOn(conn Conn, tableName string, opts ...Option) (*Optimistic, error) {
	c := newConfig(opts)
	t, err := newTableOn(conn, tableName, c)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return newOptimistic(t, c)
}

func newOptimistic(t table, c config) (*Optimistic, error) {
	err := sqldialect.Ident("version column", c.version)
	switch {
	case err != nil:
	case c.attempts < 1:
		err = fmt.Errorf("attempts %d below 1", c.attempts)
	case c.backoff < 0 || c.maxBackoff < 0:
		err = fmt.Errorf("negative backoff %v, %v", c.backoff, c.maxBackoff)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: state: %w", ErrInvalid, err)
	}
	return &Optimistic{t: t, version: c.version, attempts: c.attempts, backoff: c.backoff, maxBackoff: c.maxBackoff}, nil
}

// In returns a copy of o that runs its statements on db. Inside a transaction
// a conflict cannot resolve itself on retry at most isolation levels, so use
// it with WithAttempts(1) there and retry the whole transaction instead.
func (o *Optimistic) In(db DB) *Optimistic { return o.On(sqlconn.Std(db)) }

// On returns a copy of o that runs its statements on conn, typically a
// transaction of another driver (pgxstate.Conn(tx)); as for In, use
// WithAttempts(1) inside a transaction. conn must be of the same database
// and dialect as o's.
func (o *Optimistic) On(conn Conn) *Optimistic {
	c := *o
	c.t.db = conn
	return &c
}

// Update reads the columns named in read (into their pointers) and the
// version of the row with key, then calls fn, which looks at what was read and
// returns the columns to write. Update writes them and bumps the version in
// one UPDATE that succeeds only if the version is still the one read. If
// another writer got there first, it sleeps a jittered backoff, reads again and
// calls fn again on the fresh values, up to the configured attempts.
//
// fn may run several times and must have no effects outside its result. If
// fn returns an error, Update returns it and writes nothing; if fn returns no
// values, Update writes nothing and returns nil. values may not set the key or
// version column.
//
// Errors: fn's error, ErrConflict (every attempt lost a race), ErrNotFound,
// an error wrapping ErrInvalid, an error wrapping ErrRetry (deadlock, lock
// wait timeout), ctx's error while backing off, or the database's error.
func (o *Optimistic) Update(ctx context.Context, key any, read Into, fn func() (Values, error)) error {
	cols := make([]string, 0, len(read))
	for c := range read {
		if err := sqldialect.Ident("column", c); err != nil {
			return fmt.Errorf("%w: state: %w", ErrInvalid, err)
		}
		cols = append(cols, c)
	}
	slices.Sort(cols)
	sel := fmt.Sprintf("SELECT COALESCE(%s, 0)", o.version)
	if len(cols) > 0 {
		sel += ", " + strings.Join(cols, ", ")
	}
	sel = o.t.dialect.Rebind(sel + fmt.Sprintf(" FROM %s WHERE %s = $1", o.t.name, o.t.key))

	for attempt := 1; ; attempt++ {
		var version int64
		dest := []any{&version}
		for _, c := range cols {
			dest = append(dest, read[c])
		}
		switch err := o.t.db.QueryRow(ctx, sel, key).Scan(dest...); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: %s row %v", ErrNotFound, o.t.name, key)
		case err != nil:
			return fmt.Errorf("state: read %s: %w", o.t.name, sqldialect.Retryable(err))
		}
		values, err := fn()
		if err != nil || len(values) == 0 {
			return err
		}
		set, args, err := setClause(values, nil, o.t.key, o.version)
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		args = append(args, key, version)
		q := o.t.dialect.Rebind(fmt.Sprintf("UPDATE %s SET %s%s = COALESCE(%s, 0) + 1 WHERE %s = $%d AND COALESCE(%s, 0) = $%d",
			o.t.name, set, o.version, o.version, o.t.key, len(args)-1, o.version, len(args)))
		// The version always changes: affected rows are matched rows on
		// MySQL too.
		res, err := o.t.db.Exec(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("state: update %s: %w", o.t.name, sqldialect.Retryable(err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("state: update %s: %w", o.t.name, err)
		} else if n > 0 {
			return nil
		}
		if attempt >= o.attempts {
			refused(ctx, Refusal{Reason: RefusedConflict, Table: o.t.name})
			return fmt.Errorf("%w: %s row %v changed under each of %d attempts", ErrConflict, o.t.name, key, attempt)
		}
		if err := sleep(ctx, o.delay(attempt)); err != nil {
			return err
		}
	}
}

// delay is the full-jitter backoff before attempt+1.
func (o *Optimistic) delay(attempt int) time.Duration {
	ceil := o.backoff << min(attempt-1, 20)
	if ceil > o.maxBackoff || ceil <= 0 {
		ceil = o.maxBackoff
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
