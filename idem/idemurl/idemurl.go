// Package idemurl opens an idempotency store named by a URL, for programs in
// which the user, not the code, picks the store: the latchkey gateway, a
// config file, an environment variable. Libraries should take an idem.Store
// instead.
//
//	mem://                                  in-process (idem/memstore): one process only
//	sqlite:///var/lib/app/idem.db           SQLite file (idem/sqlstore), shared by the processes of one machine
//	sqlite:idem.db                          the same, path relative to the working directory
//	postgres://user:pass@host:5432/db       PostgreSQL on a pgx pool (idem/sqlstore.NewPgx)
//	postgresql://...                        the same
//	mysql://user:pass@host:3306/db          MySQL 8.0 or MariaDB 10.6+ through go-sql-driver/mysql (idem/sqlstore)
//	redis://[user:pass@]host:6379[/db]      one Redis (idem/redisstore); rediss:// for TLS
//	redis-cluster://host:port[,host:port]   a Redis Cluster reached through any listed node
//
// Redis URLs also take prefix=P, the prefix of every key the store writes
// (default "idem:"), so that several applications can share one Redis. SQL
// stores create their tables (idem_records, idem_tokens) on Open.
//
// Errors never repeat a password given in the URL; [Redact] shows a URL the
// same way.
package idemurl

import (
	"context"
	"database/sql"
	"errors"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/backendurl"
)

// A Store is an idem.Store that owns its connections.
type Store interface {
	idem.Store
	// Ping reports whether the store's server answers; nil for mem://.
	Ping(ctx context.Context) error
	// Close releases the connections. Calls made after it fail.
	Close() error
}

// ErrUnsupported is wrapped by Open's error when the URL's scheme is not one
// this package opens. The message lists the schemes that are.
var ErrUnsupported = errors.New("idemurl: unsupported scheme")

// schemes holds every scheme Open knows. A new backend is one entry and one
// opener function.
var schemes = backendurl.Schemes[Store]{
	Pkg: "idemurl", Invalid: idem.ErrInvalid, Unsupported: ErrUnsupported,
	Openers: map[string]backendurl.Opener[Store]{
		"mem":           openMem,
		"sqlite":        openSQLite,
		"postgres":      openPostgres,
		"postgresql":    openPostgres,
		"mysql":         openMySQL,
		"redis":         openRedis,
		"rediss":        openRedis,
		"redis-cluster": openRedis,
	},
}

// Schemes returns the URL schemes Open accepts, sorted.
func Schemes() []string { return schemes.Names() }

// Open returns the store rawURL names, connected (its server has answered)
// and with its tables created. The caller must Close it. Errors: one wrapping
// idem.ErrInvalid for a URL that cannot be parsed or lacks what its scheme
// needs (also ErrUnsupported when the scheme is unknown), ctx.Err(), or the
// server's error when it cannot be reached. No error contains the URL's
// password.
func Open(ctx context.Context, rawURL string) (Store, error) {
	return schemes.Open(ctx, rawURL)
}

// Redact returns rawURL with its passwords (the userinfo password and any
// password or sslpassword query parameter) replaced by "xxxxx", for logs and
// messages.
func Redact(rawURL string) string { return backendurl.Redact(rawURL) }

// invalidf returns an error for a bad URL: errors.Is(err, idem.ErrInvalid)
// holds, and the message reads without the sentinel's prefix.
func invalidf(format string, args ...any) error {
	return backendurl.Invalidf(idem.ErrInvalid, format, args...)
}

// closeOnError closes db when a later step of opening fails.
func closeOnError(db *sql.DB, err error) error {
	_ = db.Close()
	return err
}
