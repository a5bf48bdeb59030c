package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

type holdResult struct {
	roundTrips, renewals, ticks int64
	perTick                     float64
	heapMiB, rssMiB             float64
	cpuPerSec                   float64
	lost                        int
}

// countHook counts round trips (a command or a pipeline) and the renewal
// scripts among the commands.
type countHook struct {
	roundTrips, renewals atomic.Int64
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.roundTrips.Add(1)
		for _, c := range cmds {
			// Only the renewal script is called with one key.
			if a := c.Args(); len(a) > 2 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[2]) == "1" {
				h.renewals.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// holding acquires n leases (TTL 30 s, renewed) and holds them for d,
// counting round trips and CPU, and measuring the memory they take.
func holding(ctx context.Context, addr, prefix string, n int, d time.Duration) holdResult {
	c := newGoRedis(addr)
	defer c.Close()
	h := &countHook{}
	c.AddHook(h)
	l, err := redislock.New(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer l.Close()
	if err := c.Ping(ctx).Err(); err != nil { // connect before measuring
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	heap0, rss0 := memory()

	leases := make([]*lock.Lease, n)
	sem := make(chan struct{}, 64)
	for i := range leases {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			lease, err := l.Acquire(ctx, prefix+strconv.Itoa(i), lock.WithTTL(ttl), lock.WithWait(0))
			if err != nil {
				fmt.Fprintln(os.Stderr, "acquire:", err)
				os.Exit(1)
			}
			leases[i] = lease
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	heap1, rss1 := memory()

	rt0, rn0 := h.roundTrips.Load(), h.renewals.Load()
	cpu0 := cpuTime()
	start := time.Now()
	time.Sleep(d)
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	r := holdResult{
		roundTrips: h.roundTrips.Load() - rt0,
		renewals:   h.renewals.Load() - rn0,
		// Signed: the GC may return more to the system than the leases took.
		heapMiB:   float64(int64(heap1)-int64(heap0)) / (1 << 20),
		rssMiB:    float64(int64(rss1)-int64(rss0)) / (1 << 20),
		cpuPerSec: cpu.Seconds() / elapsed.Seconds(),
	}
	r.ticks = int64(elapsed / (ttl / 3))
	if r.ticks > 0 {
		r.perTick = float64(r.roundTrips) / float64(r.ticks)
	}
	for _, lease := range leases {
		select {
		case <-lease.Done():
			r.lost++
		default:
		}
		_ = lease.Release(ctx)
	}
	return r
}

func memory() (heap, rss uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return ms.HeapInuse, rss
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
