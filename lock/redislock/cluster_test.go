package redislock

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

// startCluster starts a 3-master Redis Cluster of private servers, each with
// an explicit cluster bus port (so no port+10000 needs to be free), and
// returns its nodes once every node reports cluster_state:ok.
func startCluster(t *testing.T) []*testsvc.RedisServer {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testsvc.Unavailable(t, "redis-cli not found on PATH (apt-get install redis-tools)")
	}
	var nodes []*testsvc.RedisServer
	args := []string{"--cluster", "create"}
	for range 3 {
		bus := testsvc.FreePort(t)
		n := testsvc.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus))
		nodes = append(nodes, n)
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitClusterOK(t, nodes)
	return nodes
}

func waitClusterOK(t *testing.T, nodes []*testsvc.RedisServer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster node %s not ok: %v %s", n.Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
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
			waitClusterOK(t, nodes)
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
