package sqlconn

import (
	"context"
	"database/sql"
	"sync"
)

// PreparedDB is a DB on a *sql.DB that runs each distinct statement given to
// Exec or QueryRow as a prepared statement of the pool: prepared on a
// connection the first time it runs there, then sent as the statement's id
// and its arguments, which the server neither parses nor plans again. On
// MySQL that saves most of the server's work on a short statement, and with
// a driver that would otherwise prepare, execute and close each statement
// (go-sql-driver without interpolateParams=true) it saves two of three round
// trips. Each statement stays prepared on each connection it ran on until
// Close, or until the connection closes.
//
// A statement the server refuses to prepare (unprepared reports which
// errors say so: MySQL's limit max_prepared_stmt_count reached, say) runs
// unprepared from then on; so do all statements after Close. Transactions
// (Begin) and Query run unprepared.
type PreparedDB struct {
	DB         // the pool, unprepared
	db         *sql.DB
	unprepared func(error) bool

	stmts sync.Map // query -> *sql.Stmt; nil once the server refused it

	// live is read-locked while a statement runs prepared or one is
	// remembered, and locked by Close (and refused), which thus wait for
	// them and leave none to start.
	live   sync.RWMutex
	closed bool
}

// Prepared returns db as a PreparedDB. unprepared reports whether an error
// of preparing or of running a prepared statement means the server will not
// prepare it (nothing of it ran): it then runs unprepared.
func Prepared(db *sql.DB, unprepared func(error) bool) *PreparedDB {
	return &PreparedDB{DB: StdDB(db), db: db, unprepared: unprepared}
}

// Exec runs q prepared, or unprepared if the server will not prepare it.
func (p *PreparedDB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st := p.stmt(ctx, q)
	if st == nil {
		return p.DB.Exec(ctx, q, args...)
	}
	res, err := st.ExecContext(ctx, args...)
	p.live.RUnlock()
	if err != nil && p.unprepared(err) {
		p.refused(q)
		return p.DB.Exec(ctx, q, args...)
	}
	return res, err
}

// QueryRow runs q prepared, or unprepared if the server will not prepare it.
func (p *PreparedDB) QueryRow(ctx context.Context, q string, args ...any) Row {
	st := p.stmt(ctx, q)
	if st == nil {
		return p.DB.QueryRow(ctx, q, args...)
	}
	defer p.live.RUnlock()
	return preparedRow{st.QueryRowContext(ctx, args...), func() Row {
		p.refused(q)
		return p.DB.QueryRow(ctx, q, args...)
	}, p.unprepared}
}

// preparedRow is a prepared query's row, whose error shows only in Scan:
// when it says the server would not prepare the query, the query runs
// again unprepared.
type preparedRow struct {
	row        *sql.Row
	again      func() Row
	unprepared func(error) bool
}

func (r preparedRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if err != nil && r.unprepared(err) {
		return r.again().Scan(dest...)
	}
	return err
}

// stmt returns q's prepared statement with p.live read-locked, or nil (and
// p.live as it was) when q runs unprepared; it prepares q on first use.
func (p *PreparedDB) stmt(ctx context.Context, q string) *sql.Stmt {
	st, settled := p.running(q)
	if st == nil && !settled {
		p.prepare(ctx, q)
		st, _ = p.running(q)
	}
	return st
}

// running returns q's prepared statement with p.live read-locked, or nil
// with p.live as it was; settled reports whether q needs no preparation
// (prepared, refused for good, or p closed).
func (p *PreparedDB) running(q string) (st *sql.Stmt, settled bool) {
	p.live.RLock()
	v, known := p.stmts.Load(q)
	if st, _ := v.(*sql.Stmt); st != nil && !p.closed {
		return st, true
	}
	settled = known || p.closed
	p.live.RUnlock()
	return nil, settled
}

// prepare prepares q and remembers the answer: the statement, or nil when
// the server refused it for good. Other errors (a connection that failed,
// ctx done) leave q to run unprepared this time and to be prepared again
// next time. No lock is held while the server answers, so a call waits for
// nothing but its own preparation, within its own ctx; calls that prepare
// the same statement at once keep the first and close the others'.
func (p *PreparedDB) prepare(ctx context.Context, q string) {
	st, err := p.db.PrepareContext(ctx, q)
	if err != nil {
		if p.unprepared(err) {
			p.stmts.Store(q, nil)
		}
		return
	}
	p.live.RLock() // Close, which write-locks, then finds it to close
	kept := !p.closed
	if kept {
		_, loaded := p.stmts.LoadOrStore(q, st)
		kept = !loaded
	}
	p.live.RUnlock()
	if !kept {
		_ = st.Close()
	}
}

// refused makes q run unprepared from now on.
func (p *PreparedDB) refused(q string) {
	p.live.Lock() // no one runs q's statement, and no one will
	v, _ := p.stmts.Swap(q, nil)
	p.live.Unlock()
	if st, _ := v.(*sql.Stmt); st != nil {
		_ = st.Close()
	}
}

// Close waits for the statements running prepared and closes them on the
// server; statements after Close run unprepared. It does not close the pool.
func (p *PreparedDB) Close() error {
	p.live.Lock()
	p.closed = true
	var open []*sql.Stmt
	p.stmts.Range(func(_, v any) bool {
		if st, _ := v.(*sql.Stmt); st != nil {
			open = append(open, st)
		}
		return true
	})
	p.live.Unlock()
	for _, st := range open {
		_ = st.Close()
	}
	return nil
}
