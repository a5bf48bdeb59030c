package redislock

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func TestRWConformance(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(t *testing.T) *rwlock.Locker {
			l, err := NewRW(newClient(t, addr), WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}

// rwTarget opens a read-write Locker from "addr prefix", in this process
// and in the children of the process checks.
var rwTarget = rwlocktest.Target{
	Name: "redis",
	Open: func(_ context.Context, config string) (*rwlock.Locker, error) {
		addr, prefix, ok := strings.Cut(config, " ")
		if !ok {
			return nil, fmt.Errorf("config %q: want addr prefix", config)
		}
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		l, err := NewRW(c, WithPrefix(prefix))
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return l, nil
	},
}

func TestRWProcesses(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	rwlocktest.RunProcesses(t, rwTarget, addr+" "+prefix)
}

// TestRWConformanceCluster runs the read-write suite on a 3-master Redis
// Cluster: each script's keys share the name's hash tag.
func TestRWConformanceCluster(t *testing.T) {
	nodes := startCluster(t)
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(t *testing.T) *rwlock.Locker {
			l, err := NewRW(newClusterClient(t, nodes))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}
