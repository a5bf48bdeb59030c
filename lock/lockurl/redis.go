package lockurl

import (
	"context"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// redisOpener opens what newFn (redislock.New, NewRW, NewSemaphores) makes
// on the client a redis URL names, made into a T by on.
// redis://[user:password@]host:port[/db][?opts]: one Redis, options as
// redis.ParseURL reads them (rediss:// for TLS), plus cacert=FILE (the CA
// that signs the server's certificate) and cert=FILE&key=FILE (the client's
// certificate, for a server that asks for one), which turn TLS on.
// redis-cluster://host1:port1,host2:port2[?opts]: a Redis Cluster reached
// through any of the listed nodes, with the same TLS files.
func redisOpener[V, T any](newFn func(redislock.Client, ...redislock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, raw string, u *url.URL) (T, error) {
		c, err := redisConnect(ctx, raw, u)
		if err != nil {
			return none[T](err)
		}
		v, err := newFn(c)
		return owning(v, err, c.Close, on)
	}
}

type redisClient interface {
	redislock.Client
	Ping(ctx context.Context) *redis.StatusCmd
	Close() error
}

// redisConnect returns a client of the Redis or Redis Cluster a redis:// or
// redis-cluster:// URL names, checked to answer, whose calls end at their
// context's deadline (go-redis's ContextTimeoutEnabled).
func redisConnect(ctx context.Context, raw string, u *url.URL) (redisClient, error) {
	c, err := backendurl.RedisClient(raw, u.Scheme, lock.ErrInvalid, true)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// redisLocker closes its client after the Locker.
type redisLocker struct {
	*redislock.Locker
	conns
}

func (l *redisLocker) Close() error { return l.close(l.Locker.Close) }

func redisLockerOn(l *redislock.Locker, closeConn func() error) Locker {
	return &redisLocker{Locker: l, conns: conns{closeConn: closeConn}}
}

var _ Locker = (*redisLocker)(nil)
