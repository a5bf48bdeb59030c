package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// semaphorePermits are the permit counts the semaphore table measures.
var semaphorePermits = []int{1, 4, 16}

// semaphoreBench measures, per backend, the semaphore with 1, 4 and 16
// permits next to the backend's own lock, in one run: pairs/s with each
// goroutine on a name of its own, and 16 goroutines contending for one name.
// Then it holds held permits on Redis and counts the renewal round trips.
// With withEtcd it also starts a private etcd and measures there.
func semaphoreBench(ctx context.Context, addr, pgURL, prefix string, runs int, dur time.Duration, held int, holdFor time.Duration, withEtcd bool) {
	dir, err := os.MkdirTemp("", "latchkey-bench-sem")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	backends := []struct{ name, url string }{
		{"Redis", "redis://" + addr},
		{"PostgreSQL", pgURL},
		{"SQLite", "sqlite://" + filepath.ToSlash(filepath.Join(dir, "bench.db"))},
	}
	if withEtcd {
		fmt.Fprintln(os.Stderr, "starting etcd ...")
		s, c, err := startEtcd()
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcd:", err)
			os.Exit(1)
		}
		defer s.stop()
		backends = append(backends, struct{ name, url string }{"etcd", "etcd://" + strings.TrimPrefix(c.Endpoints()[0], "http://")})
		c.Close()
	}
	for _, b := range backends {
		if b.url == "" {
			continue
		}
		impls := []impl{{"lock", func() (locker, error) { return openURLLock(ctx, b.url) }}}
		for _, n := range semaphorePermits {
			impls = append(impls, impl{fmt.Sprintf("semaphore, %d permit%s", n, map[bool]string{true: "s"}[n > 1]),
				func() (locker, error) { return openURLSemaphore(ctx, b.url, n) }})
		}
		fmt.Fprintf(os.Stderr, "semaphores on %s ...\n", b.name)
		// The implementations take turns within each run, so a machine
		// whose load changes during the test weighs on all alike.
		ls := make([]locker, len(impls))
		for i, im := range impls {
			l, err := im.open()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s %s: %v\n", b.name, im.name, err)
				os.Exit(1)
			}
			l.stalls = new(atomic.Int64)
			ls[i] = l
		}
		limit := func(i int) int64 {
			if i == 0 {
				return 1
			}
			return int64(semaphorePermits[i-1])
		}
		unc := make([][][]float64, len(impls)) // by impl, goroutine count, run
		cs := make([][]contendedResult, len(impls))
		for i := range impls {
			unc[i] = make([][]float64, len(goroutineCounts))
		}
		for run := range runs {
			for gi, g := range goroutineCounts {
				for i, l := range ls {
					unc[i][gi] = append(unc[i][gi], uncontended(ctx, l, fmt.Sprintf("%ssem:%s:%d:u%d:%d:", prefix, b.name, i, g, run), g, dur))
				}
			}
			for i, l := range ls {
				cs[i] = append(cs[i], contendedN(ctx, l, fmt.Sprintf("%ssem:%s:%d:c%d", prefix, b.name, i, run), 16, dur, limit(i)))
			}
		}
		res := map[string]*result{}
		for i, im := range impls {
			r := &result{contended: medianContended(cs[i]), stalls: ls[i].stalls.Load()}
			for gi := range goroutineCounts {
				r.uncontended = append(r.uncontended, median(len(unc[i][gi]), func(run int) float64 { return unc[i][gi][run] }))
			}
			ls[i].close()
			res[im.name] = r
		}
		fmt.Printf("\n%s: semaphores against the lock of the same backend (ratios to the lock)\n", b.name)
		printTable(impls, res)
	}
	defer deleteSemaphoreKeys(ctx, addr, prefix)
	if held > 0 {
		fmt.Fprintf(os.Stderr, "holding %d permits for %v ...\n", held, holdFor)
		h := holdingPermits(ctx, addr, prefix+"sem:held", held, holdFor)
		fmt.Printf("\nlatchkey holding %d permits of one Redis semaphore (TTL 30 s, renewed every 10 s) for %v:\n", held, holdFor)
		fmt.Printf("- round trips per renewal tick: %.2f (%d round trips, %d renewal ticks, %d renewals)\n",
			h.perTick, h.roundTrips, h.ticks, h.renewals)
		fmt.Printf("- CPU while holding: %.1f ms per second\n", h.cpuPerSec*1000)
		fmt.Printf("- permits lost: %d\n", h.lost)
	}
}

// openURLLock opens the lock backend url names, as a locker.
func openURLLock(ctx context.Context, url string) (locker, error) {
	l, err := lockurl.Open(ctx, url)
	if err != nil {
		return locker{}, err
	}
	return locker{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, lock.WithTTL(ttl))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		},
		close: func() { _ = l.Close() },
	}, nil
}

// openURLSemaphore opens the semaphore backend url names, as a locker whose
// keys are semaphores of n permits.
func openURLSemaphore(ctx context.Context, url string, n int) (locker, error) {
	c, err := lockurl.OpenSemaphores(ctx, url)
	if err != nil {
		return locker{}, err
	}
	return locker{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			s, err := c.Semaphore(key, n)
			if err != nil {
				return nil, err
			}
			p, err := s.Acquire(ctx, lock.WithTTL(ttl))
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		},
		close: func() { _ = c.Close() },
	}, nil
}

// semRenewHook counts round trips and, among the commands, the semaphore
// renewal script: the one called with two keys.
type semRenewHook struct{ roundTrips, renewals atomic.Int64 }

func (h *semRenewHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *semRenewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}
func (h *semRenewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.roundTrips.Add(1)
		for _, c := range cmds {
			if a := c.Args(); len(a) > 2 && strings.HasPrefix(fmt.Sprint(a[0]), "eval") && fmt.Sprint(a[2]) == "2" {
				h.renewals.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// holdingPermits takes n permits of one semaphore of n on Redis, holds them
// for d and counts the round trips their renewals take.
func holdingPermits(ctx context.Context, addr, name string, n int, d time.Duration) holdResult {
	c := newGoRedis(addr)
	defer c.Close()
	h := &semRenewHook{}
	c.AddHook(h)
	sems, err := redislock.NewSemaphores(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer sems.Close()
	s, err := sems.Semaphore(name, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	permits := make([]*semaphore.Permit, n)
	gate := make(chan struct{}, 64)
	for i := range permits {
		gate <- struct{}{}
		go func() {
			defer func() { <-gate }()
			p, err := s.Acquire(ctx, lock.WithTTL(ttl), lock.WithWait(0))
			if err != nil {
				fmt.Fprintln(os.Stderr, "acquire:", err)
				os.Exit(1)
			}
			permits[i] = p
		}()
	}
	for range cap(gate) {
		gate <- struct{}{}
	}
	rt0, rn0 := h.roundTrips.Load(), h.renewals.Load()
	cpu0 := cpuTime()
	start := time.Now()
	time.Sleep(d)
	elapsed := time.Since(start)
	r := holdResult{
		roundTrips: h.roundTrips.Load() - rt0,
		renewals:   h.renewals.Load() - rn0,
		cpuPerSec:  (cpuTime() - cpu0).Seconds() / elapsed.Seconds(),
	}
	r.ticks = int64(elapsed / (ttl / 3))
	if r.ticks > 0 {
		r.perTick = float64(r.roundTrips) / float64(r.ticks)
	}
	for _, p := range permits {
		select {
		case <-p.Done():
			r.lost++
		default:
		}
		_ = p.Release(ctx)
	}
	return r
}

// deleteSemaphoreKeys deletes what the semaphore test left on Redis (the
// fencing counters outlive their permits by a day).
func deleteSemaphoreKeys(ctx context.Context, addr, prefix string) {
	c := newGoRedis(addr)
	defer c.Close()
	iter := c.Scan(ctx, 0, redislock.DefaultPrefix+"{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = c.Del(ctx, iter.Val()).Err()
	}
}
