package lockurl

import (
	"context"
	"fmt"
	"net/url"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/lock/zklock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// An RWLocker is a read-write Locker (package rwlock) that owns its
// connections: Close closes them after the Locker.
type RWLocker struct {
	*rwlock.Locker
	conns
}

// Close closes the Locker, then the connections it was opened with. It is
// safe to call more than once.
func (l *RWLocker) Close() error { return l.close(l.Locker.Close) }

func rwLockerOn(l *rwlock.Locker, closeConn func() error) *RWLocker {
	return &RWLocker{Locker: l, conns: conns{closeConn: closeConn}}
}

// rwSchemes holds every scheme OpenRW knows: those of Open whose backend
// has read-write locks.
var rwSchemes = backendurl.Schemes[*RWLocker]{
	Pkg: "lockurl", Invalid: lock.ErrInvalid, Unsupported: ErrUnsupported,
	Openers: map[string]backendurl.Opener[*RWLocker]{
		"mem":           openMemRW,
		"sqlite":        sqliteOpener(sqllock.NewRW, rwLockerOn),
		"postgres":      postgresOpener(sqllock.NewPgxRW, rwLockerOn),
		"postgresql":    postgresOpener(sqllock.NewPgxRW, rwLockerOn),
		"redis":         redisOpener(redislock.NewRW, rwLockerOn),
		"rediss":        redisOpener(redislock.NewRW, rwLockerOn),
		"redis-cluster": redisOpener(redislock.NewRW, rwLockerOn),
		"etcd":          etcdOpener(etcdlock.NewRW, rwLockerOn),
		"zk":            zkOpener(zklock.NewRW, rwLockerOn),
		"mysql":         openMySQLRW,
		"redlock":       noRW("Redlock"),
	},
}

// RWSchemes returns the URL schemes OpenRW accepts, sorted.
func RWSchemes() []string { return rwSchemes.Names() }

// OpenRW returns the read-write Locker rawURL names, as Open does for a
// lock: the same URLs, for the backends that have read-write locks (not
// mysql:// and redlock://). The caller must Close it. Errors are Open's.
func OpenRW(ctx context.Context, rawURL string) (*RWLocker, error) {
	return rwSchemes.Open(ctx, rawURL)
}

// openMySQLRW gives sqllock's own refusal of read-write locks on MySQL,
// after checking that the URL names a database.
func openMySQLRW(ctx context.Context, _ string, u *url.URL) (*RWLocker, error) {
	db, err := mysqlDB(u)
	if err != nil {
		return nil, err
	}
	l, err := sqllock.NewRW(ctx, db, sqllock.MySQL)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return &RWLocker{Locker: l, conns: conns{closeConn: db.Close}}, nil
}

// noRW refuses a backend without read-write locks, saying which have them.
func noRW(name string) backendurl.Opener[*RWLocker] {
	return func(context.Context, string, *url.URL) (*RWLocker, error) {
		return nil, fmt.Errorf("%w: %w: %s has no read-write locks; they need PostgreSQL, SQLite, Redis, etcd or ZooKeeper", ErrUnsupported, lock.ErrInvalid, name)
	}
}

func openMemRW(ctx context.Context, raw string, u *url.URL) (*RWLocker, error) {
	if _, err := openMem(ctx, raw, u); err != nil { // the same checks
		return nil, err
	}
	return &RWLocker{Locker: memlock.NewRW()}, nil
}
