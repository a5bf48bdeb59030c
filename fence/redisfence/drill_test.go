package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/fencetest"
	"github.com/latchkey-go/latchkey/fence/redisfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// target is lock/redislock with a redisfence-guarded string per key, on one
// Redis. Its config is "addr|key prefix".
//
// Other Redis lock backends (lock/redlock, ...) join the drill and the
// linearizability check by adding a Target here with their Locker.
var target = fencetest.Target{Name: "redis", Open: func(ctx context.Context, config string) (*fencetest.Conn, error) {
	addr, prefix, _ := strings.Cut(config, "|")
	c := redis.NewClient(&redis.Options{Addr: addr})
	locker, err := redislock.New(c, redislock.WithPrefix(prefix+"lock:"))
	if err != nil {
		c.Close()
		return nil, err
	}
	g, err := redisfence.New(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &fencetest.Conn{Locker: locker, Register: register{g, prefix + "reg:"}, Close: func() {
		locker.Close()
		c.Close()
	}}, nil
}}

func TestMain(m *testing.M) { fencetest.Main(m, target) }

type register struct {
	g      *redisfence.Guard
	prefix string
}

func (r register) Write(ctx context.Context, h fence.Holder, key, value string) error {
	return r.g.Set(ctx, h, r.prefix+key, value, 0)
}

func (r register) Claim(ctx context.Context, h fence.Holder, key string) (string, error) {
	return r.g.Read(ctx, h, r.prefix+key)
}

func (r register) Read(ctx context.Context, key string) (string, uint64, error) {
	v, tok, err := r.g.Get(ctx, r.prefix+key)
	if errors.Is(err, fence.ErrNotFound) {
		return "", tok, nil
	}
	return v, tok, err
}

// targetConfig returns a config whose keys are unique to the test and
// deleted when it ends.
func targetConfig(t *testing.T) string {
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx := context.Background()
		for _, pattern := range []string{prefix + "*", "{" + prefix + "*"} {
			iter := c.Scan(ctx, 0, pattern, 100).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		}
	})
	return addr + "|" + prefix
}

// TestPauseDrill runs the pause drill for lock/redislock, fenced by this
// package.
func TestPauseDrill(t *testing.T) {
	t.Parallel()
	fencetest.Drill(t, target, targetConfig(t))
}

// TestLinearizable checks histories of fenced writes under pauses and kills.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	fencetest.Linearize(t, target, targetConfig(t))
}

// TestReadModifyWriteUnderPauses runs paused and fresh holders incrementing
// one counter by read-modify-write.
func TestReadModifyWriteUnderPauses(t *testing.T) {
	t.Parallel()
	fencetest.ReadModifyWrite(t, target, targetConfig(t))
}
