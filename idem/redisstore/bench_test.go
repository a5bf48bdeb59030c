package redisstore_test

import (
	"context"

	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The benchmarks run from 64 goroutines against a private redis-server and
// report, besides ns/op, what a request costs in CPU: cpu-us/op is this
// process's user and system time, srv-us/op the server's. Those depend far
// less on the machine's load than ns/op does.

// The guard people write by hand: SET NX EX before the handler, duplicates
// rejected, no replay, failures lost. The baseline for the real cycle.
func BenchmarkHandWrittenGuard(b *testing.B) {
	c := benchClient(b)
	var n atomic.Int64
	benchParallel(b, c, func(ctx context.Context) {
		k := "guard:" + strconv.FormatInt(n.Add(1), 10)
		if ok, err := c.SetNX(ctx, k, "1", 10*time.Minute).Result(); err != nil || !ok {
			b.Error(ok, err)
		}
	})
}

// BenchmarkDoFirstRequest is the full cycle for new keys: claim, run, record
// (2 round trips alone, fewer when calls share pipelines).
func BenchmarkDoFirstRequest(b *testing.B) {
	c := benchClient(b)
	s := redisstore.New(c)
	var n atomic.Int64
	benchParallel(b, c, func(ctx context.Context) {
		k := "first:" + strconv.FormatInt(n.Add(1), 10)
		if _, err := idem.Do(ctx, s, k, func(context.Context) (int, error) { return 1, nil }, idem.WithRetention(10*time.Minute)); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkDoReplay replays a recorded result (1 round trip).
func BenchmarkDoReplay(b *testing.B) {
	c := benchClient(b)
	s := redisstore.New(c)
	ctx := context.Background()
	fn := func(context.Context) (string, error) { return `{"charge":"ch_1","amount":100}`, nil }
	if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
		b.Fatal(err)
	}
	benchParallel(b, c, func(ctx context.Context) {
		if _, err := idem.Do(ctx, s, "replay", fn); err != nil {
			b.Error(err)
		}
	})
}

// benchParallel runs fn from 64 goroutines and reports the CPU both sides
// spent per call.
func benchParallel(b *testing.B, c *redis.Client, fn func(context.Context)) {
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	srv0 := serverCPU(b, c)
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			fn(ctx)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(serverCPU(b, c)-srv0)/float64(time.Microsecond)/float64(b.N), "srv-us/op")
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the Redis server's user and system time so far (INFO cpu).
func serverCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// benchClient is a client of a private redis-server, which no one else's
// commands load.
func benchClient(b *testing.B) *redis.Client {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	return c
}
