package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// A Transition is a declared move of a status from one value to another.
type Transition struct {
	From, To string
}

// Result says how a successful move ended.
type Result int

const (
	// Applied means this call changed the row's status.
	Applied Result = iota + 1
	// Duplicate means the row was already in the target state: an earlier
	// call (or another process) made the move. Nothing changed; treat it as
	// the idempotent success it is, and do not repeat the move's side effects.
	Duplicate
)

func (r Result) String() string {
	switch r {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// A Machine moves rows of one table along declared transitions of one status
// column. It is safe for concurrent use and holds no connection.
type Machine struct {
	t       table
	status  string
	sources map[string][]string // to -> declared froms, sorted
}

// DefaultStatusColumn holds a row's state unless WithStatusColumn says
// otherwise.
const DefaultStatusColumn = "status"

// NewMachine returns a Machine for the status column of table on db, allowing
// exactly the transitions given. It touches no server. Errors wrap ErrInvalid:
// nil db, no transitions, a transition to itself or with an empty state, names
// that are not plain identifiers, or a driver whose dialect cannot be told.
func NewMachine(db *sql.DB, tableName string, transitions []Transition, opts ...Option) (*Machine, error) {
	c := newConfig(opts)
	t, err := newTable(db, tableName, c)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return newMachine(t, c, transitions)
}

// NewMachineOn is NewMachine on a Conn, for drivers other than database/sql
// (state/pgxstate's NewMachine calls it with a pgx pool). The dialect cannot
// be detected there: pass WithDialect. Errors wrap ErrInvalid, as NewMachine's.
func NewMachineOn(conn Conn, tableName string, transitions []Transition, opts ...Option) (*Machine, error) {
	c := newConfig(opts)
	t, err := newTableOn(conn, tableName, c)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return newMachine(t, c, transitions)
}

func newMachine(t table, c config, transitions []Transition) (*Machine, error) {
	m := &Machine{t: t, status: c.status, sources: map[string][]string{}}
	if err := errors.Join(sqldialect.Ident("key column", m.t.key), sqldialect.Ident("status column", m.status)); err != nil {
		return nil, fmt.Errorf("%w: state: %w", ErrInvalid, err)
	}
	if len(transitions) == 0 {
		return nil, fmt.Errorf("%w: state: no transitions declared", ErrInvalid)
	}
	for _, tr := range transitions {
		if tr.From == "" || tr.To == "" || tr.From == tr.To {
			return nil, fmt.Errorf("%w: state: bad transition %q -> %q", ErrInvalid, tr.From, tr.To)
		}
		if !slices.Contains(m.sources[tr.To], tr.From) {
			m.sources[tr.To] = append(m.sources[tr.To], tr.From)
		}
	}
	for _, s := range m.sources {
		slices.Sort(s)
	}
	return m, nil
}

// In returns a copy of m that runs its statements on db, typically a *sql.Tx.
func (m *Machine) In(db DB) *Machine { return m.On(sqlconn.Std(db)) }

// On returns a copy of m that runs its statements on conn, typically a
// transaction of another driver: orders.On(pgxstate.Conn(tx)) moves rows
// inside a pgx.Tx, committed or rolled back with it. conn must be of the
// same database and dialect as m's.
func (m *Machine) On(conn Conn) *Machine {
	c := *m
	c.t.db = conn
	return &c
}

// Allowed reports whether a move from one state to another is declared.
func (m *Machine) Allowed(from, to string) bool {
	return slices.Contains(m.sources[to], from)
}

// Move changes the status of the row with key to `to`, if its current status
// is one from which a transition to `to` is declared, and sets values (which
// may be nil; it may not set the key or status column) in the same UPDATE.
//
// It returns Applied when this call changed the row, and Duplicate when the
// row was already in state `to` (nothing changed). Errors: ErrIllegal (the
// row is in another state, or no transition to `to` is declared; the server is
// not touched then), ErrNotFound, an error wrapping ErrInvalid, an error
// wrapping ErrRetry (deadlock, lock wait timeout), or the database's error.
func (m *Machine) Move(ctx context.Context, key any, to string, values Values) (Result, error) {
	froms := m.sources[to]
	if len(froms) == 0 {
		refused(ctx, Refusal{Reason: RefusedIllegal, Table: m.t.name, To: to})
		return 0, fmt.Errorf("%w: no transition to %q is declared", ErrIllegal, to)
	}
	set, args, err := setClause(values, nil, m.t.key, m.status)
	if err != nil {
		return 0, fmt.Errorf("state: %w", err)
	}
	args = append(args, to, key)
	toP, keyP := len(args)-1, len(args)
	in := make([]string, len(froms))
	for i, f := range froms {
		args = append(args, f)
		in[i] = fmt.Sprintf("$%d", len(args))
	}
	q := m.t.dialect.Rebind(fmt.Sprintf("UPDATE %s SET %s%s = $%d WHERE %s = $%d AND %s IN (%s)",
		m.t.name, set, m.status, toP, m.t.key, keyP, m.status, strings.Join(in, ", ")))

	// The UPDATE alone decides; the read after a miss only tells the caller
	// why. If the read finds a source state again, the row moved back in
	// between: try again.
	for range 3 {
		// The status always changes, so the affected rows are the matched
		// rows on MySQL too, whatever its clientFoundRows.
		res, err := m.t.db.Exec(ctx, q, args...)
		if err != nil {
			return 0, fmt.Errorf("state: move %s to %s: %w", m.t.name, to, sqldialect.Retryable(err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, fmt.Errorf("state: move %s to %s: %w", m.t.name, to, err)
		} else if n > 0 {
			return Applied, nil
		}
		// The latest committed row, not the REPEATABLE READ snapshot of the
		// caller's transaction, which may predate the move the UPDATE met.
		cur, err := m.current(ctx, key, m.t.dialect.LockRead())
		if err != nil {
			return 0, err
		}
		if cur == to {
			refused(ctx, Refusal{Reason: RefusedDuplicate, Table: m.t.name, To: to})
			return Duplicate, nil
		}
		if !slices.Contains(froms, cur) {
			refused(ctx, Refusal{Reason: RefusedIllegal, Table: m.t.name, To: to})
			return 0, fmt.Errorf("%w: %s row %v is %q; %q is reachable only from %q", ErrIllegal, m.t.name, key, cur, to, froms)
		}
	}
	refused(ctx, Refusal{Reason: RefusedIllegal, Table: m.t.name, To: to})
	return 0, fmt.Errorf("%w: %s row %v keeps changing state", ErrIllegal, m.t.name, key)
}

// Current returns the status of the row with key. Errors: ErrNotFound, or the
// database's error. Deciding a move on it would race; Move decides in its
// UPDATE.
func (m *Machine) Current(ctx context.Context, key any) (string, error) {
	return m.current(ctx, key, "")
}

// current is Current, its SELECT ending in lockRead.
func (m *Machine) current(ctx context.Context, key any, lockRead string) (string, error) {
	q := m.t.dialect.Rebind(fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1%s", m.status, m.t.name, m.t.key, lockRead))
	var cur sql.NullString
	switch err := m.t.db.QueryRow(ctx, q, key).Scan(&cur); {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("%w: %s row %v", ErrNotFound, m.t.name, key)
	case err != nil:
		return "", fmt.Errorf("state: read %s: %w", m.t.name, sqldialect.Retryable(err))
	}
	return cur.String, nil
}
