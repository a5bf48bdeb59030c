// Package dedupurl opens, from a URL, the dedup store an operator inspects:
// where a consumer keeps its message ids, named as idemurl names idempotency
// stores.
//
//	mem://                                   an empty in-process store (FromIdem over idem/memstore)
//	redis://[user:pass@]host:6379[/db]       dedup/redisstore; rediss:// for TLS; prefix=P (default "dedup:")
//	redis-cluster://host:port[,host:port]    the same on a Redis Cluster
//	redis://host:6379?bloom=NAME&capacity=N&rate=R
//	                                         the dedup/bloomfilter filter NAME, with the sizing its consumers
//	                                         give it, period=D (default 24h) and prefix=P (default "bloom:")
//	postgres://user:pass@host:5432/db        the dedup/sqlinbox table (table=T, default dedup_inbox;
//	postgresql://...                         retention=D, default 24h, for when a mark may be purged)
//	sqlite:///var/lib/app/inbox.db           the same in an existing SQLite file; sqlite:rel/path too
//	mysql://user:pass@host:3306/db           the same on MySQL 8 or MariaDB 10.6+ (the driver's parameters
//	                                         as for lock/lockurl: backendurl.MySQLDSN)
//
// Opening creates nothing: a SQLite file that does not exist is refused,
// and no table is created. Errors never repeat a password given in the URL.
package dedupurl

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/backendurl"
)

// A Store is a dedup.Inspector that owns its connections.
type Store interface {
	dedup.Inspector
	// Close releases the connections.
	Close() error
}

// ErrUnsupported is wrapped by Open's error for a scheme it does not open.
var ErrUnsupported = errors.New("dedupurl: unsupported scheme")

var schemes = backendurl.Schemes[Store]{
	Pkg: "dedupurl", Invalid: dedup.ErrInvalid, Unsupported: ErrUnsupported,
	Openers: map[string]backendurl.Opener[Store]{
		"mem":           openMem,
		"redis":         openRedis,
		"rediss":        openRedis,
		"redis-cluster": openRedis,
		"postgres":      openPostgres,
		"postgresql":    openPostgres,
		"sqlite":        openSQLite,
		"mysql":         openMySQL,
	},
}

// Open returns the store rawURL names, connected (its server has answered).
// The caller must Close it. Errors: one wrapping dedup.ErrInvalid for a URL
// that cannot be parsed or lacks what its scheme needs (also ErrUnsupported
// for an unknown scheme), ctx.Err(), or the server's error.
func Open(ctx context.Context, rawURL string) (Store, error) { return schemes.Open(ctx, rawURL) }

func invalidf(format string, args ...any) error {
	return backendurl.Invalidf(dedup.ErrInvalid, format, args...)
}

// cutParams removes the named parameters, which the drivers do not know,
// from raw's query and returns their values; each may be given once.
func cutParams(raw string, names ...string) (string, map[string]string, error) {
	return backendurl.CutParams(dedup.ErrInvalid, "URL", raw, names...)
}

func duration(params map[string]string, name string, def time.Duration) (time.Duration, error) {
	v, ok := params[name]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < dedup.MinDuration || d > dedup.MaxDuration {
		return 0, invalidf("%s=%q is not a duration from %v to %v", name, v, dedup.MinDuration, dedup.MaxDuration)
	}
	return d, nil
}

// mem://: an empty store of this process, to try the commands on.
func openMem(_ context.Context, _ string, u *url.URL) (Store, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" {
		return nil, invalidf("mem:// takes no host, path or parameters")
	}
	return closer{dedup.FromIdem(memstore.New()).(dedup.Inspector), func() error { return nil }}, nil
}

type closer struct {
	dedup.Inspector
	close func() error
}

func (c closer) Close() error { return c.close() }

func openRedis(ctx context.Context, raw string, u *url.URL) (Store, error) {
	raw, p, err := cutParams(raw, "prefix", "bloom", "capacity", "rate", "period")
	if err != nil {
		return nil, err
	}
	c, err := backendurl.RedisClient(raw, u.Scheme, dedup.ErrInvalid, false)
	if err != nil {
		return nil, err
	}
	in, err := redisInspector(c, p)
	if err == nil {
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return closer{in, c.Close}, nil
}

// redisInspector is the dedup/redisstore store, or with bloom=NAME the filter.
func redisInspector(c redis.UniversalClient, p map[string]string) (dedup.Inspector, error) {
	name, bloom := p["bloom"]
	if !bloom {
		for _, n := range []string{"capacity", "rate", "period"} {
			if _, ok := p[n]; ok {
				return nil, invalidf("%s is a Bloom filter's parameter; name the filter with bloom=NAME", n)
			}
		}
		prefix := redisstore.DefaultPrefix
		if v, ok := p["prefix"]; ok {
			prefix = v
		}
		return redisstore.New(c, redisstore.WithPrefix(prefix)), nil
	}
	capacity, err := strconv.ParseInt(p["capacity"], 10, 64)
	if err != nil {
		return nil, invalidf("bloom=%s needs capacity=N, the ids per generation its consumers give it", name)
	}
	rate, err := strconv.ParseFloat(p["rate"], 64)
	if err != nil {
		return nil, invalidf("bloom=%s needs rate=R, the false-positive rate its consumers give it", name)
	}
	period, err := duration(p, "period", bloomfilter.DefaultPeriod)
	if err != nil {
		return nil, err
	}
	opts := []bloomfilter.Option{bloomfilter.WithPeriod(period)}
	if v, ok := p["prefix"]; ok {
		opts = append(opts, bloomfilter.WithPrefix(v))
	}
	return bloomfilter.New(c, name, capacity, rate, opts...)
}

func openPostgres(ctx context.Context, raw string, _ *url.URL) (Store, error) {
	raw, p, err := cutParams(raw, "table", "retention")
	if err != nil {
		return nil, err
	}
	return openInbox(ctx, "pgx", raw, p)
}

func openMySQL(ctx context.Context, raw string, _ *url.URL) (Store, error) {
	raw, p, err := cutParams(raw, "table", "retention")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	dsn, err := backendurl.MySQLDSN(u)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	return openInbox(ctx, "mysql", dsn, p)
}

func openSQLite(ctx context.Context, _ string, u *url.URL) (Store, error) {
	path, err := backendurl.SQLitePath(u)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, invalidf("sqlite file %s: %w", path, errors.Unwrap(err))
	}
	_, p, err := cutParams("?"+u.RawQuery, "table", "retention")
	if err != nil {
		return nil, err
	}
	return openInbox(ctx, "sqlite", backendurl.SQLiteDSN(path), p)
}

func openInbox(ctx context.Context, driver, dsn string, p map[string]string) (Store, error) {
	retention, err := duration(p, "retention", dedup.DefaultRetention)
	if err != nil {
		return nil, err
	}
	opts := []sqlinbox.Option{sqlinbox.WithRetention(retention)}
	if t, ok := p["table"]; ok {
		opts = append(opts, sqlinbox.WithTable(t))
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	if driver == "sqlite" {
		// Processes opening a file not yet in WAL mode at once race to
		// switch it; the loser's first connection fails with SQLITE_BUSY.
		err = backendurl.SQLiteReady(ctx, db)
	} else {
		err = db.PingContext(ctx)
	}
	var in *sqlinbox.Inbox
	if err == nil {
		in, err = sqlinbox.New(db, opts...)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return closer{in, db.Close}, nil
}
