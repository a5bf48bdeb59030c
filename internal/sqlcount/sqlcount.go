// Package sqlcount counts the round trips a client makes to its SQL server,
// through database/sql (a wrapping connector, Open) or pgx (a tracer,
// Tracer), so that tests and benchmarks can check what an operation costs:
// one statement per acquire, renewal tick, release, claim. It counts on the
// client, so the server's other clients (tests running at once) do not
// disturb the count.
//
// A round trip is a statement run on a connection, or the preparation of one:
// go-sql-driver/mysql without interpolateParams=true prepares every
// statement with arguments and then executes it, two round trips (the
// statement's close sends no answer and is not counted); pgx prepares a
// statement once per connection and caches it.
package sqlcount

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// A Counter counts round trips. Its zero value is ready; it is safe for
// concurrent use.
type Counter struct{ n atomic.Int64 }

// Load returns the round trips counted so far.
func (c *Counter) Load() int64 { return c.n.Load() }

func (c *Counter) add() { c.n.Add(1) }

// Open is sql.Open(driverName, dsn) with every round trip of the pool's
// connections counted by c. db.Driver() is the driver itself, so that
// latchkey's SQL packages detect the dialect as usual.
func Open(driverName, dsn string, c *Counter) (*sql.DB, error) {
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	_ = probe.Close()
	var inner driver.Connector
	if dc, ok := d.(driver.DriverContext); ok {
		if inner, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	} else {
		inner = dsnConnector{d, dsn}
	}
	return sql.OpenDB(connector{inner, d, c}), nil
}

type dsnConnector struct {
	d   driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

type connector struct {
	inner driver.Connector
	d     driver.Driver
	c     *Counter
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{cn, c.c}, nil
}

func (c connector) Driver() driver.Driver { return c.d }

// conn forwards to the driver's connection what database/sql asks of it,
// counting the calls that reach the server.
type conn struct {
	driverConn
	c *Counter
}

// driverConn names the embedded driver connection apart from pgx's (Conn).
type driverConn = driver.Conn

// Conn gives pgx's connection under the driver's, when the driver is pgx's
// (pgx/v5/stdlib), so that code that LISTENs through database/sql works
// through the counter too; its round trips are not counted.
func (cn *conn) Conn() *pgx.Conn {
	if pc, ok := cn.driverConn.(interface{ Conn() *pgx.Conn }); ok {
		return pc.Conn()
	}
	return nil
}

var errNoContext = errors.New("sqlcount: the driver's connection has no context-aware method")

func (cn *conn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := cn.driverConn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, q)
	} else {
		st, err = cn.driverConn.Prepare(q)
	}
	if !errors.Is(err, driver.ErrBadConn) {
		cn.c.add() // the server's answer, a refusal too
	}
	if err != nil {
		return nil, err
	}
	return &stmt{st, cn.c}, nil
}

func (cn *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := cn.driverConn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoContext
	}
	cn.c.add()
	return b.BeginTx(ctx, opts)
}

func (cn *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cn.driverConn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := e.ExecContext(ctx, q, args)
	if !errors.Is(err, driver.ErrSkip) {
		cn.c.add()
	}
	return r, err
}

func (cn *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := cn.driverConn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := qc.QueryContext(ctx, q, args)
	if !errors.Is(err, driver.ErrSkip) {
		cn.c.add()
	}
	return r, err
}

func (cn *conn) CheckNamedValue(v *driver.NamedValue) error {
	if c, ok := cn.driverConn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (cn *conn) Ping(ctx context.Context) error {
	if p, ok := cn.driverConn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (cn *conn) ResetSession(ctx context.Context) error {
	if r, ok := cn.driverConn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cn *conn) IsValid() bool {
	if v, ok := cn.driverConn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// stmt counts the executions of a prepared statement.
type stmt struct {
	driver.Stmt
	c *Counter
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, errNoContext
	}
	s.c.add()
	return e.ExecContext(ctx, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, errNoContext
	}
	s.c.add()
	return q.QueryContext(ctx, args)
}

func (s *stmt) CheckNamedValue(v *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

// Tracer returns a pgx tracer that counts c's round trips: set it as a
// pgxpool.Config's ConnConfig.Tracer. It counts every query and every
// preparation (pgx prepares a statement once per connection).
func (c *Counter) Tracer() pgx.QueryTracer { return tracer{c} }

type tracer struct{ c *Counter }

var (
	_ pgx.QueryTracer   = tracer{}
	_ pgx.PrepareTracer = tracer{}
)

func (t tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.c.add()
	return ctx
}

func (tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t tracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.c.add()
	return ctx
}

func (tracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
