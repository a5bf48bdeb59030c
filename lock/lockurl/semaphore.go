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
		"sqlite":        sqliteOpener(sqllock.NewSemaphores, semaphoresOn),
		"postgres":      postgresOpener(sqllock.NewPgxSemaphores, semaphoresOn),
		"postgresql":    postgresOpener(sqllock.NewPgxSemaphores, semaphoresOn),
		"mysql":         mysqlOpener(sqllock.NewSemaphores, semaphoresOn),
		"redis":         redisOpener(redislock.NewSemaphores, semaphoresOn),
		"rediss":        redisOpener(redislock.NewSemaphores, semaphoresOn),
		"redis-cluster": redisOpener(redislock.NewSemaphores, semaphoresOn),
		"etcd":          etcdOpener(etcdlock.NewSemaphores, semaphoresOn),
		"zk":            zkOpener(zklock.NewSemaphores, semaphoresOn),
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
