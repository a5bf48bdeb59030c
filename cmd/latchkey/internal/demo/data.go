package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"   // also registers the "mysql" database/sql driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	dedupredis "github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// The demo's business data: what locks, fences and idempotency keys are there
// to protect. It lives in the --db database (a SQLite file unless --db names
// PostgreSQL or MySQL), in tables apart from the lock's and the stores' own,
// each declared by the scenario that uses it; rows are named per run, so a
// reused database never mixes runs. Statements are templates for
// sqldialect.Fill: $N placeholders, {key} for a text primary key's type, and
// the upserts of sqldialect (OnConflict, Excluded, DoNothing), so that one
// text serves SQLite, PostgreSQL and MySQL.

// accountsTable holds the accounts of the transfers (version:
// state.Optimistic) and of the paused holder (fence_token: sqlfence).
const accountsTable = `CREATE TABLE IF NOT EXISTS demo_accounts (id {key} PRIMARY KEY, balance BIGINT NOT NULL,
		version BIGINT NOT NULL DEFAULT 0, fence_token BIGINT NOT NULL DEFAULT 0)`

// tablesOf returns the tables the scenarios declare, each once.
func tablesOf(plays []*scenario) []string {
	var tables []string
	for _, s := range plays {
		for _, t := range s.tables {
			if !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
	}
	return tables
}

// Tables of the idempotency and dedup stores when they are SQL: apart from
// the defaults, so the demo never meets an application's own records.
const (
	idemTable       = "demo_idem_records"
	idemTokenTable  = "demo_idem_tokens"
	dedupTable      = "demo_dedup_records"
	dedupTokenTable = "demo_dedup_tokens"
	redisIdemPrefix = "latchkey-demo:idem:"
	redisDedupPfx   = "latchkey-demo:dedup:"
)

// A dataDB is the demo's connection pool to its business data.
type dataDB struct {
	*sql.DB
	dialect sqldialect.Dialect
}

// q fills in a statement template for the database.
func (db *dataDB) q(query string) string { return db.dialect.Fill(query) }

func (db *dataDB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.ExecContext(ctx, db.q(query), args...)
}

func (db *dataDB) row(ctx context.Context, query string, args ...any) *sql.Row {
	return db.QueryRowContext(ctx, db.q(query), args...)
}

// parseDataURL turns --db into the data URL: a SQLite file (a plain path,
// sqlite:///abs/path or sqlite:rel/path), postgres:// or mysql://. It
// returns "" for a redis:// URL, whose data goes to a SQLite file of the
// demo's choosing.
func parseDataURL(raw string) (data string, isRedis bool, err error) {
	switch {
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"), strings.HasPrefix(raw, "mysql://"):
		return raw, false, nil
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"):
		return "", true, nil
	case strings.HasPrefix(raw, "sqlite:"):
		u, err := url.Parse(raw)
		if err != nil {
			return "", false, fmt.Errorf("--db: %w", errors.New("not a sqlite URL"))
		}
		p := u.Path
		if u.Opaque != "" {
			p = u.Opaque
		}
		if p == "" {
			return "", false, errors.New("--db: sqlite URL names no file")
		}
		return sqliteDataURL(p)
	case strings.Contains(raw, "://"):
		scheme, _, _ := strings.Cut(raw, "://")
		return "", false, fmt.Errorf("--db: unsupported scheme %q (supported: a SQLite file, sqlite://, postgres://, mysql://, redis://)", scheme)
	}
	return sqliteDataURL(raw)
}

func sqliteDataURL(path string) (string, bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false, err
	}
	return (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(abs)}).String(), false, nil
}

// sqlitePathOf returns the file of a sqlite:// data URL, "" for others.
func sqlitePathOf(dataURL string) string {
	if !strings.HasPrefix(dataURL, "sqlite:") {
		return ""
	}
	u, err := url.Parse(dataURL)
	if err != nil {
		return ""
	}
	return filepath.FromSlash(u.Path)
}

// openData opens the data database with up to conns connections.
func openData(ctx context.Context, dataURL string, conns int) (*dataDB, error) {
	driver, dsn, dialect := "pgx", dataURL, sqldialect.Postgres
	if p := sqlitePathOf(dataURL); p != "" {
		driver, dsn, dialect = "sqlite", backendurl.SQLiteDSN(p), sqldialect.SQLite
	}
	if strings.HasPrefix(dataURL, "mysql://") {
		var err error
		if dsn, err = mysqlDataDSN(dataURL); err != nil {
			return nil, fmt.Errorf("--db %s: %w", lockurl.Redact(dataURL), err)
		}
		driver, dialect = "mysql", sqldialect.MySQL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening the data database %s: %w", lockurl.Redact(dataURL), err)
	}
	return &dataDB{DB: db, dialect: dialect}, nil
}

// mysqlDataDSN is the driver's DSN for a mysql:// data URL, without
// CLIENT_FOUND_ROWS whatever the URL says: the demo's inserts that keep an
// existing row (sqldialect.DoNothing) count affected rows.
func mysqlDataDSN(dataURL string) (string, error) {
	u, err := url.Parse(dataURL)
	if err != nil {
		return "", errors.New("not a mysql URL")
	}
	dsn, err := backendurl.MySQLDSN(u)
	if err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	cfg.ClientFoundRows = false
	return cfg.FormatDSN(), nil
}

// createData creates tables and, when the stores are SQL, the stores' own.
// On PostgreSQL, concurrent CREATE TABLE IF NOT EXISTS can collide, so demos
// sharing a server take turns under an advisory lock.
func createData(ctx context.Context, db *dataDB, tables []string, sqlStores bool) (err error) {
	if db.dialect == sqldialect.Postgres {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		h := fnv.New64a()
		h.Write([]byte("latchkey-demo schema"))
		lockID := int64(h.Sum64() >> 1)
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lockID); err != nil {
			return fmt.Errorf("creating the demo's tables: %w", err)
		}
		defer func() {
			_, uerr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockID)
			err = errors.Join(err, uerr)
		}()
	}
	for _, q := range tables {
		if _, err := db.ExecContext(ctx, db.q(q)); err != nil {
			return fmt.Errorf("creating the demo's tables: %w", err)
		}
	}
	if !sqlStores {
		return nil
	}
	for _, o := range [][]sqlstore.Option{
		{sqlstore.WithTable(idemTable), sqlstore.WithTokenTable(idemTokenTable)},
		{sqlstore.WithTable(dedupTable), sqlstore.WithTokenTable(dedupTokenTable)},
	} {
		s, err := sqlstore.New(db.DB, o...)
		if err != nil {
			return err
		}
		if err := s.Migrate(ctx); err != nil {
			return fmt.Errorf("creating the idempotency tables: %w", err)
		}
	}
	return nil
}

// stores are the idempotency and dedup stores a process of the demo uses,
// opened from the store URL: "sql" (tables in the data database), redis://,
// or mem:// (private to the process: the sabotage).
type stores struct {
	idem  idem.Store
	dedup dedup.Store
	naive naiveClaimer
	close func() error
}

const sqlStoreURL = "sql"

func openStores(ctx context.Context, storeURL string, data *dataDB) (*stores, error) {
	switch {
	case storeURL == "" || storeURL == sqlStoreURL:
		is, err := sqlstore.New(data.DB, sqlstore.WithTable(idemTable), sqlstore.WithTokenTable(idemTokenTable))
		if err != nil {
			return nil, err
		}
		ds, err := sqlstore.New(data.DB, sqlstore.WithTable(dedupTable), sqlstore.WithTokenTable(dedupTokenTable))
		if err != nil {
			return nil, err
		}
		return &stores{idem: is, dedup: dedup.FromIdem(ds), naive: sqlNaive{data}, close: func() error { return nil }}, nil
	case strings.HasPrefix(storeURL, "redis://"), strings.HasPrefix(storeURL, "rediss://"):
		opt, err := redis.ParseURL(storeURL)
		if err != nil {
			return nil, fmt.Errorf("--db %s: %w", lockurl.Redact(storeURL), errors.New("not a Redis URL"))
		}
		c := redis.NewClient(opt)
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("reaching Redis at %s: %w", lockurl.Redact(storeURL), err)
		}
		return &stores{
			idem:  redisstore.New(c, redisstore.WithPrefix(redisIdemPrefix)),
			dedup: dedupredis.New(c, dedupredis.WithPrefix(redisDedupPfx)),
			naive: redisNaive{c},
			close: c.Close,
		}, nil
	case storeURL == "mem://":
		return &stores{idem: memstore.New(), dedup: dedup.FromIdem(memstore.New()),
			naive: &memNaive{seen: map[string]bool{}}, close: func() error { return nil }}, nil
	}
	return nil, fmt.Errorf("unsupported store %q", lockurl.Redact(storeURL))
}

// A naiveClaimer is the naive consumer dedup: mark the message consumed
// before handling it, and skip it when the mark is already there.
type naiveClaimer interface {
	// claim reports whether id was not marked yet, and marks it.
	claim(ctx context.Context, id string) (bool, error)
}

type sqlNaive struct{ db *dataDB }

func (n sqlNaive) claim(ctx context.Context, id string) (bool, error) {
	res, err := n.db.exec(ctx, `INSERT INTO demo_consumed (message_id) VALUES ($1) `+n.db.dialect.DoNothing("message_id"), id)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k == 1, err
}

type redisNaive struct{ c *redis.Client }

func (n redisNaive) claim(ctx context.Context, id string) (bool, error) {
	return n.c.SetNX(ctx, "latchkey-demo:consumed:"+id, "1", 24*time.Hour).Result()
}

type memNaive struct {
	mu   sync.Mutex
	seen map[string]bool // guarded by mu
}

func (n *memNaive) claim(_ context.Context, id string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[id] {
		return false, nil
	}
	n.seen[id] = true
	return true, nil
}

// setBalance creates or resets an account.
func setBalance(ctx context.Context, db *dataDB, id string, balance int64) error {
	_, err := db.exec(ctx, `INSERT INTO demo_accounts (id, balance) VALUES ($1, $2) `+db.dialect.OnConflict("id")+
		` balance = `+db.dialect.Excluded("balance")+`, version = 0, fence_token = 0`, id, balance)
	return err
}

func readBalance(ctx context.Context, db *dataDB, id string) (int64, error) {
	var v int64
	err := db.row(ctx, `SELECT balance FROM demo_accounts WHERE id = $1`, id).Scan(&v)
	return v, err
}

// writeBalance is the unguarded write: whatever the writer computed wins.
func writeBalance(ctx context.Context, db *dataDB, id string, v int64) error {
	_, err := db.exec(ctx, `UPDATE demo_accounts SET balance = $1 WHERE id = $2`, v, id)
	return err
}
