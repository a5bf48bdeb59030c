package redislock

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

// startCluster starts a 3-master Redis Cluster of private servers.
func startCluster(t *testing.T) []*testsvc.RedisServer {
	t.Helper()
	return testsvc.StartRedisCluster(t, nil)
}

func newClusterClient(t testing.TB, nodes []*testsvc.RedisServer) *redis.ClusterClient {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestConformanceCluster runs locktest on a 3-master Redis Cluster; Restart
// restarts every node (they come back empty, with their slots).
func TestConformanceCluster(t *testing.T) {
	nodes := startCluster(t)
	admin := newClusterClient(t, nodes)
	locktest.Run(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, err := New(newClusterClient(t, nodes))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Revoke: func(t *testing.T, key string) {
			if err := admin.Del(ctxT(t), redisnode.LockKey(DefaultPrefix, key)).Err(); err != nil {
				t.Errorf("revoke: %v", err)
			}
		},
		Restart: func(t *testing.T) {
			for _, n := range nodes {
				n.Restart()
			}
			testsvc.WaitRedisCluster(t, nodes)
		},
	})
}

// TestOneNameOneResourceCluster: the modes of one name exclude each other on
// Redis Cluster too: their keys share the name's hash tag, so one script
// sees them all.
func TestOneNameOneResourceCluster(t *testing.T) {
	nodes := startCluster(t)
	modetest.Run(t, modeHarness(func(t *testing.T) Client { return newClusterClient(t, nodes) }, func(t *testing.T) string { return t.Name() }))
}
