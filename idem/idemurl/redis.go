package idemurl

import (
	"context"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/backendurl"
)

// redis://[user:password@]host:port[/db][?opts]: one Redis, options as
// redis.ParseURL reads them, plus prefix=P. redis-cluster://host1:port1,
// host2:port2[?opts]: a Redis Cluster reached through any of the listed
// nodes.
func openRedis(ctx context.Context, raw string, u *url.URL) (Store, error) {
	raw, prefix, err := cutPrefix(raw)
	if err != nil {
		return nil, err
	}
	c, err := backendurl.RedisClient(raw, u.Scheme, idem.ErrInvalid, false)
	if err != nil {
		return nil, err
	}
	return newRedisStore(ctx, c, prefix)
}

// cutPrefix removes the prefix parameter, which go-redis does not know, from
// raw's query.
func cutPrefix(raw string) (rest, prefix string, err error) {
	rest, p, err := backendurl.CutParams(idem.ErrInvalid, "redis URL", raw, "prefix")
	if err != nil {
		return "", "", err
	}
	if v, ok := p["prefix"]; ok {
		return rest, v, nil
	}
	return rest, redisstore.DefaultPrefix, nil
}

type redisClient interface {
	redisstore.Client
	Ping(ctx context.Context) *redis.StatusCmd
	Close() error
}

func newRedisStore(ctx context.Context, c redisClient, prefix string) (Store, error) {
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &redisStore{Store: redisstore.New(c, redisstore.WithPrefix(prefix)), client: c}, nil
}

// redisStore owns its client.
type redisStore struct {
	*redisstore.Store
	client redisClient
}

func (s *redisStore) Ping(ctx context.Context) error { return s.client.Ping(ctx).Err() }
func (s *redisStore) Close() error                   { return s.client.Close() }

var _ Store = (*redisStore)(nil)
