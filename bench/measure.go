package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// stallAfter bounds one lock call: peers that lose a wake-up would
// otherwise hang the benchmark. Calls that hit it are counted as stalls.
const stallAfter = 5 * time.Second

func lockBounded(ctx context.Context, l locker, key string) (func(context.Context) error, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, stallAfter)
	unlock, err := l.lock(ctx, key)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			l.stalls.Add(1)
		}
		return nil, nil, err
	}
	return unlock, cancel, nil
}

// uncontended runs g goroutines, each acquiring and releasing its own key,
// for d, and returns pairs per second.
func uncontended(ctx context.Context, l locker, prefix string, g int, d time.Duration) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s%d", prefix, i)
			for time.Now().Before(stop) {
				unlock, cancel, err := lockBounded(ctx, l, key)
				if err != nil {
					continue
				}
				err = unlock(ctx)
				cancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "unlock:", err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

type contendedResult struct {
	p99        time.Duration
	maxMin     float64
	perSec     float64
	violations int64
}

// contended runs g goroutines acquiring and releasing one key for d.
func contended(ctx context.Context, l locker, key string, g int, d time.Duration) contendedResult {
	var (
		inside, violations atomic.Int64
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		waits              []time.Duration
		counts             = make([]int, g)
	)
	stop := time.Now().Add(d)
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(stop) {
				t0 := time.Now()
				unlock, cancel, err := lockBounded(ctx, l, key)
				if err != nil {
					continue
				}
				mine = append(mine, time.Since(t0))
				if inside.Add(1) != 1 {
					violations.Add(1)
				}
				counts[i]++
				inside.Add(-1)
				err = unlock(ctx)
				cancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "unlock:", err)
					return
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(waits)
	r := contendedResult{violations: violations.Load()}
	if len(waits) > 0 {
		r.p99 = waits[len(waits)*99/100]
		r.perSec = float64(len(waits)) / elapsed.Seconds()
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	if lo == 0 {
		lo = 1
	}
	r.maxMin = float64(hi) / float64(lo)
	return r
}

func medianContended(cs []contendedResult) contendedResult {
	pick := func(f func(c contendedResult) float64) float64 {
		var xs []float64
		for _, c := range cs {
			xs = append(xs, f(c))
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	var v int64
	for _, c := range cs {
		v += c.violations
	}
	return contendedResult{
		p99:        time.Duration(pick(func(c contendedResult) float64 { return float64(c.p99) })),
		maxMin:     pick(func(c contendedResult) float64 { return c.maxMin }),
		perSec:     pick(func(c contendedResult) float64 { return c.perSec }),
		violations: v,
	}
}
