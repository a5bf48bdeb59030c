package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestCluster runs the conformance suite through a ClusterClient on a private
// three-master Redis Cluster, so keys spread over nodes and a script whose keys
// left its hash tag would fail with CROSSSLOT or MOVED.
func TestCluster(t *testing.T) {
	t.Parallel()
	var nodes []*testsvc.RedisServer
	for range 3 {
		nodes = append(nodes, testsvc.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer clients[i].Close()
	}
	// Split the 16384 slots in three and introduce the nodes to each other.
	for i, c := range clients {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("ADDSLOTSRANGE: %v", err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(nodes[0].Addr(), ":")
			if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("cluster never became ready: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cc.Close() })
	s := redisstore.New(cc)

	// Keys must land on more than one node for the test to mean anything.
	seen := map[string]bool{}
	for i := range 30 {
		k := s.RecordKey(fmt.Sprint("spread-", i))
		if err := cc.Set(ctx, k+":probe", 1, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Options().Addr] = true
	}
	if len(seen) < 2 {
		t.Fatalf("30 keys all hashed to %v", seen)
	}
	idemtest.Run(t, func(*testing.T) idem.Store { return s })
	idemtest.RunTokens(t, func(*testing.T) idem.TokenStore { return s })
}
