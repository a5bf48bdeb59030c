package backendurl

import "github.com/redis/go-redis/v9"

// RedisClient returns a client, not yet connected, of the Redis a redis://
// or rediss:// URL names, or of the Redis Cluster a redis-cluster:// one
// names (see RedisOptions and ClusterOptions). With contextTimeout its calls
// end at their context's deadline (go-redis's ContextTimeoutEnabled). A URL
// it cannot read is refused with an error wrapping invalid (see Invalidf).
func RedisClient(raw, scheme string, invalid error, contextTimeout bool) (redis.UniversalClient, error) {
	if scheme == "redis-cluster" {
		opt, err := ClusterOptions(raw)
		if err != nil {
			return nil, Invalidf(invalid, "%w", err)
		}
		opt.ContextTimeoutEnabled = contextTimeout
		return redis.NewClusterClient(opt), nil
	}
	opt, err := RedisOptions(raw)
	if err != nil {
		return nil, Invalidf(invalid, "%w", err)
	}
	opt.ContextTimeoutEnabled = contextTimeout
	return redis.NewClient(opt), nil
}
