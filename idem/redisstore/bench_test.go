package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/redisstore"
)

// The benchmarks run from 64 goroutines against a private redis-server and
// report what a request costs in CPU (see teststores.BenchParallel).

// The guard people write by hand: SET NX EX before the handler, duplicates
// rejected, no replay, failures lost. The baseline for the real cycle.
func BenchmarkHandWrittenGuard(b *testing.B) {
	c := teststores.BenchRedis(b)
	var n atomic.Int64
	teststores.BenchParallel(b, c, func(ctx context.Context) {
		k := "guard:" + strconv.FormatInt(n.Add(1), 10)
		if ok, err := c.SetNX(ctx, k, "1", 10*time.Minute).Result(); err != nil || !ok {
			b.Error(ok, err)
		}
	})
}

// BenchmarkDoFirstRequest is the full cycle for new keys: claim, run, record
// (2 round trips alone, fewer when calls share pipelines).
func BenchmarkDoFirstRequest(b *testing.B) {
	c := teststores.BenchRedis(b)
	s := redisstore.New(c)
	var n atomic.Int64
	teststores.BenchParallel(b, c, func(ctx context.Context) {
		k := "first:" + strconv.FormatInt(n.Add(1), 10)
		if _, err := idem.Do(ctx, s, k, func(context.Context) (int, error) { return 1, nil }, idem.WithRetention(10*time.Minute)); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkDoReplay replays a recorded result (1 round trip).
func BenchmarkDoReplay(b *testing.B) {
	c := teststores.BenchRedis(b)
	s := redisstore.New(c)
	ctx := context.Background()
	fn := func(context.Context) (string, error) { return `{"charge":"ch_1","amount":100}`, nil }
	if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
		b.Fatal(err)
	}
	teststores.BenchParallel(b, c, func(ctx context.Context) {
		if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
			b.Error(err)
		}
	})
}
