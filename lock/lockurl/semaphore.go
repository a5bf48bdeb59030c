package lockurl

import (
	"context"
	"net/url"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/lock/zklock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// Semaphores is a semaphore.Client that owns its connections: Close closes
// them after the Client. Release its permits first.
type Semaphores struct {
	*semaphore.Client
	conns
}

// Close closes the Client, then its connections. It is safe to call more
// than once.
func (s *Semaphores) Close() error { return s.close(s.Client.Close) }

func semaphoresOn(c *semaphore.Client, closeConn func() error) *Semaphores {
	return &Semaphores{Client: c, conns: conns{closeConn: closeConn}}
}

// semSchemes holds every scheme OpenSemaphores knows: Open's, but redlock
// (the semaphore has no quorum backend).
var semSchemes = backendurl.Schemes[*Semaphores]{
	Pkg: "lockurl", Invalid: lock.ErrInvalid, Unsupported: ErrUnsupported,
	Openers: map[string]backendurl.Opener[*Semaphores]{
		"mem":           openMemSemaphores,
		"sqlite":        openSQLiteSemaphores,
		"postgres":      openPostgresSemaphores,
		"postgresql":    openPostgresSemaphores,
		"mysql":         openMySQLSemaphores,
		"redis":         openRedisSemaphores,
		"rediss":        openRedisSemaphores,
		"redis-cluster": openRedisSemaphores,
		"etcd":          openEtcdSemaphores,
		"zk":            openZKSemaphores,
	},
}

// SemaphoreSchemes returns the URL schemes OpenSemaphores accepts, sorted.
func SemaphoreSchemes() []string { return semSchemes.Names() }

// OpenSemaphores returns the semaphore Client rawURL names, with the URLs of
// Open (but redlock://): the same servers, databases and prefixes, and the
// backends' own semaphore keys and tables (see each backend's
// NewSemaphores). The caller must Close it. Errors are Open's.
func OpenSemaphores(ctx context.Context, rawURL string) (*Semaphores, error) {
	return semSchemes.Open(ctx, rawURL)
}

func openMemSemaphores(_ context.Context, _ string, u *url.URL) (*Semaphores, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return nil, invalidf("mem:// takes no host or path")
	}
	return &Semaphores{Client: memlock.NewSemaphores().Client}, nil
}

func openSQLiteSemaphores(ctx context.Context, _ string, u *url.URL) (*Semaphores, error) {
	db, err := sqliteDB(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := sqllock.NewSemaphores(ctx, db, sqllock.SQLite)
	return owning(s, err, db.Close, semaphoresOn)
}

func openPostgresSemaphores(ctx context.Context, raw string, _ *url.URL) (*Semaphores, error) {
	pool, err := pgxPool(ctx, raw)
	if err != nil {
		return nil, err
	}
	s, err := sqllock.NewPgxSemaphores(ctx, pool)
	return owning(s, err, closer(pool), semaphoresOn)
}

func openMySQLSemaphores(ctx context.Context, _ string, u *url.URL) (*Semaphores, error) {
	db, err := mysqlDB(u)
	if err != nil {
		return nil, err
	}
	s, err := sqllock.NewSemaphores(ctx, db, sqllock.MySQL)
	return owning(s, err, db.Close, semaphoresOn)
}

func openRedisSemaphores(ctx context.Context, raw string, u *url.URL) (*Semaphores, error) {
	c, err := redisConnect(ctx, raw, u)
	if err != nil {
		return nil, err
	}
	s, err := redislock.NewSemaphores(c)
	return owning(s, err, c.Close, semaphoresOn)
}

func openEtcdSemaphores(ctx context.Context, _ string, u *url.URL) (*Semaphores, error) {
	c, opts, err := etcdConnect(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := etcdlock.NewSemaphores(c, opts...)
	return owning(s, err, c.Close, semaphoresOn)
}

func openZKSemaphores(ctx context.Context, _ string, u *url.URL) (*Semaphores, error) {
	s, err := zkDial(ctx, u, zklock.NewSemaphores)
	if err != nil {
		return nil, err
	}
	return &Semaphores{Client: s}, nil
}
