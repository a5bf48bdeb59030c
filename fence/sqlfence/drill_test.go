package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/fencetest"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// The targets: lock/sqllock with a sqlfence-guarded table, in one database.
// Their config is "dsn|table prefix".
var targets = []fencetest.Target{
	{Name: "sqlite", Open: func(ctx context.Context, config string) (*fencetest.Conn, error) {
		return openTarget(ctx, "sqlite", sqllock.SQLite, config)
	}},
	{Name: "postgres", Open: func(ctx context.Context, config string) (*fencetest.Conn, error) {
		return openTarget(ctx, "pgx", sqllock.Postgres, config)
	}},
	{Name: "mysql", Open: func(ctx context.Context, config string) (*fencetest.Conn, error) {
		return openTarget(ctx, "mysql", sqllock.MySQL, config)
	}},
	// PostgreSQL through pgx without database/sql: the lock and the guard on
	// one pgx pool.
	{Name: "pgx", Open: openPgxTarget},
}

func TestMain(m *testing.M) { fencetest.Main(m, targets...) }

// register is a fenced key-value table.
type register struct {
	db    *sql.DB
	g     *sqlfence.Guard
	table string
	ph    string
}

func (r register) Write(ctx context.Context, h fence.Holder, key, value string) error {
	return r.g.Upsert(ctx, h, key, sqlfence.Values{"v": value})
}

func (r register) Claim(ctx context.Context, h fence.Holder, key string) (string, error) {
	var v string
	err := r.g.Read(ctx, h, key, sqlfence.Into{"v": &v})
	return v, err
}

func (r register) Read(ctx context.Context, key string) (string, uint64, error) {
	var v string
	var tok int64
	err := r.db.QueryRowContext(ctx, fmt.Sprintf("SELECT v, fence_token FROM %s WHERE k = %s", r.table, r.ph), key).Scan(&v, &tok)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil
	}
	return v, uint64(tok), err
}

func openTarget(ctx context.Context, driver string, d sqllock.Dialect, config string) (*fencetest.Conn, error) {
	dsn, prefix, _ := strings.Cut(config, "|")
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	ph, keyType := "$1", "TEXT"
	switch d {
	case sqllock.SQLite:
		db.SetMaxOpenConns(1) // see lock/sqllock's package doc
		ph = "?"
	case sqllock.MySQL:
		ph, keyType = "?", "VARCHAR(255)"
	}
	locker, err := sqllock.New(ctx, db, d, sqllock.WithTable(prefix+"_locks"))
	if err != nil {
		db.Close()
		return nil, err
	}
	table := prefix + "_reg"
	if _, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (k %s PRIMARY KEY, v TEXT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0)`, table, keyType)); err != nil {
		db.Close()
		return nil, err
	}
	g, err := sqlfence.New(db, table, sqlfence.WithKeyColumn("k"))
	if err != nil {
		db.Close()
		return nil, err
	}
	return &fencetest.Conn{Locker: locker, Register: register{db, g, table, ph}, Close: func() {
		locker.Close()
		db.Close()
	}}, nil
}

// openPgxTarget is openTarget on a pgx pool; the register's own reads go
// through database/sql.
func openPgxTarget(ctx context.Context, config string) (*fencetest.Conn, error) {
	dsn, prefix, _ := strings.Cut(config, "|")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		pool.Close()
		return nil, err
	}
	closeAll := func() { db.Close(); pool.Close() }
	locker, err := sqllock.NewPgx(ctx, pool, sqllock.WithTable(prefix+"_locks"))
	if err != nil {
		closeAll()
		return nil, err
	}
	table := prefix + "_reg"
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (k TEXT PRIMARY KEY, v TEXT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0)`, table)); err != nil {
		closeAll()
		return nil, err
	}
	g, err := sqlfence.NewPgx(pool, table, sqlfence.WithKeyColumn("k"))
	if err != nil {
		closeAll()
		return nil, err
	}
	return &fencetest.Conn{Locker: locker, Register: register{db, g, table, "$1"}, Close: func() {
		locker.Close()
		closeAll()
	}}, nil
}

// targetConfig makes a config for target whose tables are unique to the test
// and dropped when it ends.
func targetConfig(t *testing.T, target string) string {
	var dsn, driver string
	switch target {
	case "sqlite":
		dsn, driver = sqliteDSN(filepath.Join(t.TempDir(), "drill.db")), "sqlite"
	case "mysql":
		dsn, driver = testsvc.MySQL(t), "mysql"
	default:
		dsn, driver = testsvc.PostgresURL(t), "pgx"
	}
	prefix := testsvc.TableName("fence_drill_")
	t.Cleanup(func() {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		for _, tb := range []string{prefix + "_locks", prefix + "_reg"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return dsn + "|" + prefix
}

// TestPauseDrill runs the pause drill for lock/sqllock on SQLite and on
// PostgreSQL, fenced by this package.
func TestPauseDrill(t *testing.T) {
	for _, target := range targets {
		t.Run(target.Name, func(t *testing.T) {
			t.Parallel()
			fencetest.Drill(t, target, targetConfig(t, target.Name))
		})
	}
}

// TestLinearizable checks histories of fenced writes under pauses and kills.
func TestLinearizable(t *testing.T) {
	for _, target := range targets {
		t.Run(target.Name, func(t *testing.T) {
			t.Parallel()
			fencetest.Linearize(t, target, targetConfig(t, target.Name))
		})
	}
}

// TestReadModifyWriteUnderPauses runs paused and fresh holders incrementing one counter
// by read-modify-write, on SQLite and on PostgreSQL.
func TestReadModifyWriteUnderPauses(t *testing.T) {
	for _, target := range targets {
		t.Run(target.Name, func(t *testing.T) {
			t.Parallel()
			fencetest.ReadModifyWrite(t, target, targetConfig(t, target.Name))
		})
	}
}
