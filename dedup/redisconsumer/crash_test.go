package redisconsumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/internal/dedupdrill"
)

func TestMain(m *testing.M) { dedupdrill.Main(m, drillTarget.Role()) }

// drillConfig names the drill's stream.
type drillConfig struct {
	Addr, Stream string
	TTL          time.Duration // the deduplicator's processing TTL
}

const (
	drillGroup     = "billing"
	drillConsumers = 8 // per process
)

// drillTarget is a consumer group on one stream: each process runs eight named
// consumers; the killed child's pending entries are taken over with
// XAUTOCLAIM once idle for the processing TTL.
var drillTarget = dedupdrill.Target{
	Name: "redisconsumer",
	Publish: func(ctx context.Context, raw string, msgs []dedup.Message) error {
		cfg, err := dedupdrill.Config[drillConfig](raw)
		if err != nil {
			return err
		}
		c := redis.NewClient(&redis.Options{Addr: cfg.Addr})
		defer c.Close()
		for len(msgs) > 0 {
			chunk := msgs[:min(len(msgs), 1000)]
			msgs = msgs[len(chunk):]
			p := c.Pipeline()
			for _, m := range chunk {
				if _, err := redisconsumer.Publish(ctx, p, cfg.Stream, m); err != nil {
					return err
				}
			}
			if _, err := p.Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	},
	Consume: func(ctx context.Context, raw, proc string, h dedup.Handler) error {
		cfg, err := dedupdrill.Config[drillConfig](raw)
		if err != nil {
			return err
		}
		c := redis.NewClient(&redis.Options{Addr: cfg.Addr, PoolSize: 2 * drillConsumers})
		defer c.Close()
		return dedupdrill.Parallel(ctx, drillConsumers, func(ctx context.Context, i int) error {
			cons, err := redisconsumer.New(c, cfg.Stream, drillGroup, fmt.Sprintf("%s-%d", proc, i), h,
				redisconsumer.WithBatchSize(10), redisconsumer.WithBlock(50*time.Millisecond),
				redisconsumer.WithMinIdle(cfg.TTL), redisconsumer.WithReclaimInterval(100*time.Millisecond))
			if err != nil {
				return err
			}
			return cons.Run(ctx)
		})
	},
	Drained: func(ctx context.Context, raw string) (bool, error) {
		cfg, err := dedupdrill.Config[drillConfig](raw)
		if err != nil {
			return false, err
		}
		c := redis.NewClient(&redis.Options{Addr: cfg.Addr})
		defer c.Close()
		s, err := c.XInfoStream(ctx, cfg.Stream).Result()
		if err != nil {
			return false, err
		}
		groups, err := c.XInfoGroups(ctx, cfg.Stream).Result()
		if err != nil {
			return false, err
		}
		return len(groups) == 1 && groups[0].LastDeliveredID == s.LastGeneratedID && groups[0].Pending == 0, nil
	},
}

// TestCrashExactlyOnce: 10,000 payments, each published once or twice (a
// second copy is a new entry with the same business id), consumed by one
// group from two processes, eight consumers each; handlers fail at random
// (~10%) and the child process is SIGKILLed inside its handlers. Its pending
// entries are taken over by the test process once idle for the processing
// TTL. At the end every id took effect exactly once, the ledger holds the
// expected sum and nothing is pending (see dedupdrill).
func TestCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t)
	cfg := drillConfig{Addr: c.Options().Addr, Stream: prefix + "payments", TTL: time.Second}
	dedupdrill.Run(t, drillTarget, cfg, dedupdrill.Options{TTL: time.Second})
}
