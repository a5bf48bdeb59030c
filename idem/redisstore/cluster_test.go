package redisstore_test

import (
	"context"
	"fmt"
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
	nodes := testsvc.StartRedisCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
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
