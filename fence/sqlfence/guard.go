package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/options"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// DB is what a Guard runs its statements on through database/sql: *sql.DB,
// *sql.Tx and *sql.Conn all satisfy it. For pgx, see [NewPgx] and
// [Guard.InPgx].
type DB = sqlconn.StdHandle

// Values are the columns a guarded write sets, by name. Names must be plain
// SQL identifiers; values are passed as statement parameters, and a value
// made with [Add] changes its column relative to what it holds.
type Values = sqldialect.Values

// Into names the columns [Guard.Read] returns and where to put them: column
// name -> pointer, as for sql.Row.Scan.
type Into = sqldialect.Into

// A Guard writes to one table's rows only with tokens at least as high as the
// row's token column. It is safe for concurrent use; it holds no connection.
type Guard struct {
	db      sqlconn.Conn
	dialect Dialect
	table   string
	key     string
	token   string
}

// Defaults of the options.
const (
	// DefaultKeyColumn is the column that identifies a row.
	DefaultKeyColumn = "id"
	// DefaultTokenColumn is the column holding the row's highest token.
	DefaultTokenColumn = "fence_token"
)

// An Option configures New.
type Option func(*Guard)

// WithKeyColumn names the column that identifies a row; Upsert needs a unique
// constraint on it. Default: "id" ([DefaultKeyColumn]).
func WithKeyColumn(name string) Option { return func(g *Guard) { g.key = name } }

// WithTokenColumn names the column holding the row's highest applied token, a
// BIGINT; NULL counts as 0. Default: "fence_token" ([DefaultTokenColumn]).
func WithTokenColumn(name string) Option { return func(g *Guard) { g.token = name } }

// Dialect is the SQL flavour of the database: Detect, Postgres, SQLite or
// MySQL (MySQL 8.0 and MariaDB 10.6 or later). It is one type across
// latchkey's SQL packages (sqlfence.Postgres and state.Postgres are the same
// value).
type Dialect = sqldialect.Dialect

// The dialects. Detect tells PostgreSQL (pgx's stdlib driver, lib/pq),
// SQLite (modernc.org/sqlite qualifies) and MySQL or MariaDB
// (github.com/go-sql-driver/mysql) apart by the *sql.DB's driver.
const Detect, Postgres, SQLite, MySQL = sqldialect.Unknown, sqldialect.Postgres, sqldialect.SQLite, sqldialect.MySQL

// ErrRetry is wrapped into the database's error when a guarded statement
// failed on a deadlock, a lock wait timeout or a serialization failure (two
// transactions claiming two rows in opposite orders, say). Nothing of the
// statement was applied; roll the transaction back and run it again from its
// start, with the same lease. The driver's error stays in the chain. It is the
// same value as state.ErrRetry and sqlinbox.ErrRetry.
var ErrRetry = sqldialect.ErrRetry

// WithDialect sets the dialect. Default: Detect.
func WithDialect(d Dialect) Option { return func(g *Guard) { g.dialect = d } }

// New returns a Guard for table on db. It touches no server. Errors wrap
// fence.ErrInvalid: a nil db, a name that is not a plain identifier (the
// table may be schema-qualified), or a driver whose dialect cannot be told
// (pass WithDialect).
func New(db *sql.DB, table string, opts ...Option) (*Guard, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlfence: nil *sql.DB", fence.ErrInvalid)
	}
	return newGuard(sqlconn.Std(db), table, opts, func(d Dialect) (Dialect, error) { return sqldialect.Resolve(d, db) })
}

// newGuard is New on c, whose dialect resolve settles from the one
// WithDialect gave.
func newGuard(c sqlconn.Conn, table string, opts []Option, resolve func(Dialect) (Dialect, error)) (*Guard, error) {
	g := &Guard{db: c, table: table, key: DefaultKeyColumn, token: DefaultTokenColumn}
	options.Apply(g, opts)
	var err error
	if g.dialect, err = resolve(g.dialect); err != nil {
		return nil, fmt.Errorf("%w: sqlfence: %w; use WithDialect", fence.ErrInvalid, err)
	}
	err = errors.Join(sqldialect.Table(table), sqldialect.Ident("key column", g.key), sqldialect.Ident("token column", g.token))
	if err == nil && g.key == g.token {
		err = fmt.Errorf("key and token column are both %q", g.key)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: sqlfence: %w", fence.ErrInvalid, err)
	}
	return g, nil
}

// In returns a copy of g that runs its statements on db, typically a *sql.Tx,
// so a guarded write commits or rolls back with the caller's other
// statements. db must be of the same database as g's.
func (g *Guard) In(db DB) *Guard { return g.on(sqlconn.Std(db)) }

// on returns a copy of g that runs its statements on c.
func (g *Guard) on(c sqlconn.Conn) *Guard {
	cp := *g
	cp.db = c
	return &cp
}

// Update sets values on the row whose key column equals key, if h's token is
// at least the row's token, and raises the row's token to h's. A value made
// with [Add] changes its column relative to what the row holds when the
// statement runs ("balance = balance + $1"), so it needs no read before it.
//
// Update is one UPDATE statement; when it matches no row, a SELECT of the
// row's token tells why. Errors: fence.ErrStale (the row has a higher token;
// nothing changed), fence.ErrNotFound (no such row), an error wrapping
// fence.ErrInvalid (bad holder or column names, no values; the server is
// not touched), or the database's error.
//
// Update fences the write, not a read made before it: see [Guard.Read] for
// why a read-modify-write must claim the row first.
func (g *Guard) Update(ctx context.Context, h fence.Holder, key any, values Values) error {
	t, cols, err := g.check(h, values)
	if err != nil {
		return err
	}
	q, args := g.update(t, key, cols, values, nil)
	return g.decide(ctx, "update", t, key, func() (bool, error) { return g.exec(ctx, "update", q, args) })
}

// update builds the guarded UPDATE: it sets cols from values and the token
// column to t on the row with key, if the row's token is at most t, and
// returns the columns named in returning (not on MySQL, which has no
// RETURNING: see Read). Each parameter is used once, in order, as MySQL's ?
// need. On MySQL the token is set through LAST_INSERT_ID, so that the
// statement's result tells a matched row from none (see matched).
func (g *Guard) update(t uint64, key any, cols []string, values Values, returning []string) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, len(cols)+3)
	p := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	fmt.Fprintf(&b, "UPDATE %s SET ", g.table)
	for _, c := range cols {
		if d, ok := values[c].(Delta); ok {
			fmt.Fprintf(&b, "%s = %s + %s, ", c, c, p(d.by))
			continue
		}
		fmt.Fprintf(&b, "%s = %s, ", c, p(values[c]))
	}
	if g.dialect == MySQL {
		fmt.Fprintf(&b, "%s = LAST_INSERT_ID(%s)", g.token, p(int64(t)))
	} else {
		fmt.Fprintf(&b, "%s = %s", g.token, p(int64(t)))
	}
	fmt.Fprintf(&b, " WHERE %s = %s AND COALESCE(%s, 0) <= %s", g.key, p(key), g.token, p(int64(t)))
	if len(returning) > 0 && g.dialect != MySQL {
		fmt.Fprintf(&b, " RETURNING %s", strings.Join(returning, ", "))
	}
	return g.dialect.Rebind(b.String()), args
}

// exec runs a guarded UPDATE built by update and reports whether it matched
// the row. MySQL counts changed rows, not matched ones, unless the client set
// clientFoundRows, and a claim with the row's own token changes nothing; its
// statement's LAST_INSERT_ID, the token it set or 0, tells either way.
func (g *Guard) exec(ctx context.Context, what, q string, args []any) (bool, error) {
	res, err := g.db.Exec(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("sqlfence: %s %s: %w", what, g.table, sqldialect.Retryable(err))
	}
	var n int64
	if g.dialect == MySQL {
		n, err = res.LastInsertId()
	} else {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("sqlfence: %s %s: %w", what, g.table, err)
	}
	return n != 0, nil
}

// decide runs a guarded statement, which reports whether it matched the row,
// and, when it did not, tells why from the row's token. The statement alone
// decides; the read after a refusal only explains it. If that read finds a
// token the statement would have passed, the row changed in between (deleted
// and re-inserted): decide runs the statement again, up to three times.
// op names the call for the refusal's report.
func (g *Guard) decide(ctx context.Context, op string, t uint64, key any, run func() (bool, error)) error {
	for range 3 {
		if matched, err := run(); err != nil || matched {
			return err
		}
		cur, err := g.tokenOf(ctx, key, g.dialect.LockRead())
		if err != nil {
			return err
		}
		if cur > t {
			fence.Refused(ctx, fence.Refusal{Guard: "sql", Op: op})
			return fmt.Errorf("%w: token %d, row has %d", fence.ErrStale, t, cur)
		}
	}
	fence.Refused(ctx, fence.Refusal{Guard: "sql", Op: op})
	return fmt.Errorf("%w: %s row %v keeps changing under the statement", fence.ErrStale, g.table, key)
}

// Upsert inserts the row with key, values and h's token, or, when a row with
// key exists, updates it as Update does. It is one INSERT ... ON CONFLICT
// statement and needs a unique constraint on the key column. Values made
// with [Add] are refused: a new row has nothing to add to. Errors:
// fence.ErrStale (the row has a higher token; nothing changed), an error
// wrapping fence.ErrInvalid (as Update), or the database's error.
func (g *Guard) Upsert(ctx context.Context, h fence.Holder, key any, values Values) error {
	t, cols, err := g.check(h, values)
	if err != nil {
		return err
	}
	names := append([]string{g.key}, cols...)
	names = append(names, g.token)
	args := make([]any, 0, len(names))
	args = append(args, key)
	for _, c := range cols {
		if _, ok := values[c].(Delta); ok {
			return fmt.Errorf("%w: sqlfence: Upsert sets %s to a value, not by Add: use Update on an existing row", fence.ErrInvalid, c)
		}
		args = append(args, values[c])
	}
	args = append(args, int64(t))
	if g.dialect == MySQL {
		return g.upsertMySQL(ctx, t, key, names, args)
	}
	ph := make([]string, len(names))
	set := make([]string, 0, len(cols)+1)
	for i := range names {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	for _, c := range names[1:] {
		set = append(set, fmt.Sprintf("%s = excluded.%s", c, c))
	}
	q := g.dialect.Rebind(fmt.Sprintf(
		"INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE COALESCE(%s.%s, 0) <= excluded.%s",
		g.table, strings.Join(names, ", "), strings.Join(ph, ", "), g.key, strings.Join(set, ", "),
		sqldialect.Bare(g.table), g.token, g.token))
	res, err := g.db.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlfence: upsert %s: %w", g.table, sqldialect.Retryable(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: upsert %s: %w", g.table, err)
	}
	if n == 0 {
		fence.Refused(ctx, fence.Refusal{Guard: "sql", Op: "upsert"})
		return fmt.Errorf("%w: token %d refused by %s row %v", fence.ErrStale, t, g.table, key)
	}
	return nil
}

// upsertMySQL is Upsert as INSERT ... ON DUPLICATE KEY UPDATE, which has no
// WHERE: each assignment keeps the row's value unless the guard passes, and
// the token column, which the guard reads, is assigned last. The guard also
// asks that the row met is the row with key: ON DUPLICATE KEY fires on any
// unique index, and a collision on another one must change nothing. The
// VALUES row sets LAST_INSERT_ID to the token, a refusal to 0.
func (g *Guard) upsertMySQL(ctx context.Context, t uint64, key any, names []string, args []any) error {
	ph := make([]string, len(names))
	for i := range names {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	ph[len(ph)-1] = "LAST_INSERT_ID(" + ph[len(ph)-1] + ")"
	pass := fmt.Sprintf("%s <=> VALUES(%s) AND COALESCE(%s, 0) <= VALUES(%s)", g.key, g.key, g.token, g.token)
	set := make([]string, 0, len(names))
	for _, c := range names[1 : len(names)-1] {
		set = append(set, fmt.Sprintf("%s = IF(%s, VALUES(%s), %s)", c, pass, c, c))
	}
	set = append(set, fmt.Sprintf("%s = IF(%s, VALUES(%s), %s + LAST_INSERT_ID(0))", g.token, pass, g.token, g.token))
	q := g.dialect.Rebind(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON DUPLICATE KEY UPDATE %s",
		g.table, strings.Join(names, ", "), strings.Join(ph, ", "), strings.Join(set, ", ")))
	if ok, err := g.exec(ctx, "upsert", q, args); err != nil || ok {
		return err
	}
	cur, err := g.tokenOf(ctx, key, g.dialect.LockRead())
	if errors.Is(err, fence.ErrNotFound) {
		return fmt.Errorf("%w: sqlfence: upsert %s: row %v collides with another row on a unique key other than %s; nothing changed",
			fence.ErrInvalid, g.table, key, g.key)
	}
	if err != nil {
		return err
	}
	fence.Refused(ctx, fence.Refusal{Guard: "sql", Op: "upsert"})
	return fmt.Errorf("%w: token %d, row has %d", fence.ErrStale, t, cur)
}

// Token returns the highest token applied to the row with key (0 when its
// token column is NULL). Errors: fence.ErrNotFound, or the database's error.
// It is for reports and tests: deciding a write on it would race; the guarded
// writes decide in the statement.
func (g *Guard) Token(ctx context.Context, key any) (uint64, error) {
	return g.tokenOf(ctx, key, "")
}

// tokenOf is Token, its SELECT ending in lockRead: a refusal is explained
// from the latest committed row (dialect's LockRead), not from the snapshot
// of the caller's REPEATABLE READ transaction, which may predate the row the
// refused statement saw.
func (g *Guard) tokenOf(ctx context.Context, key any, lockRead string) (uint64, error) {
	q := g.dialect.Rebind(fmt.Sprintf("SELECT COALESCE(%s, 0) FROM %s WHERE %s = $1%s", g.token, g.table, g.key, lockRead))
	var cur int64
	switch err := g.db.QueryRow(ctx, q, key).Scan(&cur); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("%w: %s row %v", fence.ErrNotFound, g.table, key)
	case err != nil:
		return 0, fmt.Errorf("sqlfence: read token of %s: %w", g.table, sqldialect.Retryable(err))
	}
	return uint64(cur), nil
}

// check validates a write's inputs and returns its token and the value
// columns, sorted so that equal writes are equal statements.
func (g *Guard) check(h fence.Holder, values Values) (uint64, []string, error) {
	t, err := fence.TokenOf(h)
	if err != nil {
		return 0, nil, err
	}
	if len(values) == 0 {
		return 0, nil, fmt.Errorf("%w: sqlfence: no values to write (Claim raises the token alone)", fence.ErrInvalid)
	}
	cols, err := sqldialect.Columns(values, g.key, g.token)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: sqlfence: %w", fence.ErrInvalid, err)
	}
	for _, c := range cols {
		if d, ok := values[c].(Delta); ok && d.by == nil {
			return 0, nil, fmt.Errorf("%w: sqlfence: Add(nil) for column %s", fence.ErrInvalid, c)
		}
	}
	return t, cols, nil
}
