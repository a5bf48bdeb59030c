package testsvc

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedisCluster starts a Redis Cluster of three masters (no replicas),
// each a private StartRedis server with an explicit cluster bus port (so
// no port+10000 needs to be free) and the arguments nodeArgs returns for
// it (nodeArgs may be nil), joined by `redis-cli --cluster create` over
// their plain ports, and returns the nodes once every one reports
// cluster_state:ok. It calls Unavailable when redis-cli is missing.
func StartRedisCluster(t testing.TB, nodeArgs func(i int) []string) []*RedisServer {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unavailable(t, "testsvc: redis-cli not found on PATH (apt-get install redis-tools)")
	}
	var nodes []*RedisServer
	args := []string{"--cluster", "create"}
	for i := range 3 {
		argv := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(FreePort(t))}
		if nodeArgs != nil {
			argv = append(argv, nodeArgs(i)...)
		}
		n := StartRedis(t, argv...)
		nodes = append(nodes, n)
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testsvc: redis-cli --cluster create: %v\n%s", err, out)
	}
	WaitRedisCluster(t, nodes)
	return nodes
}

// WaitRedisCluster waits until every node reports cluster_state:ok, as after
// a start or a restart of the nodes, for at most 20 s.
func WaitRedisCluster(t testing.TB, nodes []*RedisServer) {
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
				_ = c.Close()
				t.Fatalf("testsvc: cluster node %s not ok: %v %s", n.Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close()
	}
}
