// Package lockurl opens a lock backend named by a URL, for programs in which
// the user, not the code, picks the backend: the latchkey CLI, a config file,
// an environment variable. Libraries should take a lock.Locker instead.
//
//	mem://                                  in-process (lock/memlock): one process only
//	sqlite:///var/lib/app/locks.db          SQLite file (lock/sqllock), shared by the processes of one machine
//	sqlite:locks.db                         the same, path relative to the working directory
//	postgres://user:pass@host:5432/db       PostgreSQL through pgx (lock/sqllock), LISTEN/NOTIFY wake-ups
//	postgresql://...                        the same
//	mysql://user:pass@host:3306/db          MySQL 8.0 or MariaDB 10.6+ (lock/sqllock), waiters take turns
//	redis://[user:pass@]host:6379[/db]      one Redis (lock/redislock), options as go-redis's ParseURL reads them
//	rediss://...                            the same over TLS
//	redis-cluster://h1:6379[,h2:6379]       a Redis Cluster (lock/redislock), the same options
//	redlock://h1:6379,h2:6379,h3:6379[/db]  Redlock over independent Redis masters (lock/redlock), majority quorum
//	etcd://host:2379[,host:2379][/prefix]   etcd cluster (lock/etcdlock), shares locks with etcdctl lock
//	zk://host:2181[,host:2181][/prefix]     ZooKeeper ensemble (lock/zklock), shares locks with Curator and kazoo
//
// [OpenSemaphores] opens the semaphores (package semaphore) of the same
// backends from the same URLs, but redlock://.
//
// Errors never repeat a password given in the URL; [Redact] shows a URL the
// same way.
package lockurl

import (
	"context"
	"errors"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// A Locker is a lock.Locker that owns its connections. Release its leases
// before Close: a lease still held when its Locker is closed is lost at its
// next renewal.
type Locker interface {
	lock.Locker
	Close() error
}

// ErrUnsupported is wrapped by Open's error when the URL's scheme is not one
// this package opens. The message lists the schemes that are.
var ErrUnsupported = errors.New("lockurl: unsupported scheme")

// schemes holds every scheme Open knows. A new backend is one entry and one
// opener function.
var schemes = backendurl.Schemes[Locker]{
	Pkg: "lockurl", Invalid: lock.ErrInvalid, Unsupported: ErrUnsupported,
	Openers: map[string]backendurl.Opener[Locker]{
		"mem":           openMem,
		"sqlite":        sqliteOpener(sqllock.New, sqlLockerOn),
		"postgres":      postgresOpener(sqllock.NewPgx, sqlLockerOn),
		"postgresql":    postgresOpener(sqllock.NewPgx, sqlLockerOn),
		"mysql":         mysqlOpener(sqllock.New, sqlLockerOn),
		"redis":         redisOpener(redislock.New, redisLockerOn),
		"rediss":        redisOpener(redislock.New, redisLockerOn),
		"redis-cluster": redisOpener(redislock.New, redisLockerOn),
		"redlock":       openRedlock,
		"etcd":          etcdOpener(etcdlock.New, etcdLockerOn),
		"zk":            zkOpener(zklock.New, zkLockerOn),
	},
}

// Schemes returns the URL schemes Open accepts, sorted.
func Schemes() []string { return schemes.Names() }

// Open returns the Locker rawURL names, connected and with its tables created.
// The caller must Close it. Errors: one wrapping lock.ErrInvalid for a URL
// that cannot be parsed or lacks what its scheme needs (also ErrUnsupported
// when the scheme is unknown), ctx.Err(), or the backend's error when it
// cannot be reached. No error contains the URL's password.
func Open(ctx context.Context, rawURL string) (Locker, error) {
	return schemes.Open(ctx, rawURL)
}

// Redact returns rawURL with its passwords (the userinfo password and any
// password or sslpassword query parameter) replaced by "xxxxx", for logs and
// messages. A string that does not parse as a URL is returned with everything
// between "://" and the last "@" of its authority masked.
func Redact(rawURL string) string { return backendurl.Redact(rawURL) }

// invalidf returns an error for a bad URL: errors.Is(err, lock.ErrInvalid)
// holds, and the message reads without the sentinel's prefix.
func invalidf(format string, args ...any) error {
	return backendurl.Invalidf(lock.ErrInvalid, format, args...)
}
