package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stallAfter bounds one lock call: peers that lose a wake-up would
// otherwise hang the benchmark. Calls that hit it are counted as stalls.
const stallAfter = 5 * time.Second

func lockBounded(ctx context.Context, l locker, key string) (func(context.Context) error, context.CancelFunc, error) {
	return callBounded(ctx, l, l.lock, key)
}

// tryBounded is lockBounded with the implementation's try, if it has one.
func tryBounded(ctx context.Context, l locker, key string) (func(context.Context) error, context.CancelFunc, error) {
	if l.try == nil {
		return lockBounded(ctx, l, key)
	}
	return callBounded(ctx, l, l.try, key)
}

func callBounded(ctx context.Context, l locker, call func(context.Context, string) (func(context.Context) error, error), key string) (func(context.Context) error, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, stallAfter)
	unlock, err := call(ctx, key)
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
				unlock, cancel, err := tryBounded(ctx, l, key)
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
	return contendedN(ctx, l, key, g, d, 1)
}

// contendedN is contended for a key that up to limit may hold at once (a
// semaphore's permits): more inside at once is a violation.
func contendedN(ctx context.Context, l locker, key string, g int, d time.Duration, limit int64) contendedResult {
	return contendedOn(ctx, func(int) locker { return l }, key, g, d, limit)
}

// contendedOn is contendedN with goroutine i using lockerOf(i).
func contendedOn(ctx context.Context, lockerOf func(i int) locker, key string, g int, d time.Duration, limit int64) contendedResult {
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
			l := lockerOf(i)
			var mine []time.Duration
			for time.Now().Before(stop) {
				t0 := time.Now()
				unlock, cancel, err := lockBounded(ctx, l, key)
				if err != nil {
					continue
				}
				mine = append(mine, time.Since(t0))
				if inside.Add(1) > limit {
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

// handOffHold is how long a holder keeps the lock in the hand-off test, so
// that the waiters are queued and watching when it releases.
const handOffHold = 2 * time.Millisecond

// handOffResult is the hand-off's median and 99th percentile, measured from
// the holder's unlock returning (ret) and from its unlock call (call).
type handOffResult struct {
	retP50, retP99, callP50, callP99 time.Duration
}

// handOff runs 1+waiters goroutines taking turns on one key for d, each
// holding for handOffHold, and measures the hand-off: from the holder's
// unlock returning (0 when the next holder got in before that) or from its
// unlock call, to the next holder's lock returning.
func handOff(ctx context.Context, l locker, key string, waiters int, d time.Duration) handOffResult {
	var (
		mu       sync.Mutex
		acquired []time.Time // by turn
		unlocked []time.Time // by turn: when the unlock was called
		released []time.Time // by turn; zero until that turn's unlock returned
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(d)
	for range waiters + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				unlock, cancel, err := lockBounded(ctx, l, key)
				if err != nil {
					continue
				}
				at := time.Now()
				mu.Lock()
				turn := len(acquired)
				acquired = append(acquired, at)
				released = append(released, time.Time{})
				unlocked = append(unlocked, time.Time{})
				mu.Unlock()
				time.Sleep(handOffHold)
				call := time.Now()
				mu.Lock()
				unlocked[turn] = call
				mu.Unlock()
				err = unlock(ctx)
				rel := time.Now()
				cancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "unlock:", err)
					return
				}
				mu.Lock()
				released[turn] = rel
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var rets, calls []time.Duration
	for i := 0; i+1 < len(acquired); i++ {
		if released[i].IsZero() {
			continue
		}
		rets = append(rets, max(acquired[i+1].Sub(released[i]), 0))
		calls = append(calls, acquired[i+1].Sub(unlocked[i]))
	}
	if len(rets) == 0 {
		return handOffResult{}
	}
	slices.Sort(rets)
	slices.Sort(calls)
	return handOffResult{
		retP50: rets[len(rets)/2], retP99: rets[len(rets)*99/100],
		callP50: calls[len(calls)/2], callP99: calls[len(calls)*99/100],
	}
}

// peerResult is one implementation's figures in a peer table.
type peerResult struct {
	uncontended []float64 // pairs/s by goroutineCounts
	contended   contendedResult
	hand        handOffResult
	stalls      int64
}

// handOffWaiters is the number of waiters in the hand-off test.
const handOffWaiters = 4

// peerBench measures impls against each other, interleaved: every run of a
// measurement runs each implementation in turn, so load from elsewhere on the
// machine falls on all of them alike. Medians of runs are reported, the
// first implementation is the base of the ratios, and rtt, the backend's
// measured round trip, is the yardstick of the hand-off.
// order is the order in which run number run measures n implementations:
// forwards in even runs, backwards in odd ones, so that none always runs
// first (on a fresh server) or last (on one that has grown with the others'
// writes: etcd never compacts here).
func order(n, run int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
		if run%2 == 1 {
			o[i] = n - 1 - i
		}
	}
	return o
}

func peerBench(ctx context.Context, impls []impl, prefix string, runs int, dur time.Duration, rtt time.Duration, rttName string) {
	ls := make([]locker, len(impls))
	for i, im := range impls {
		l, err := im.open()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", im.name, err)
			os.Exit(1)
		}
		l.stalls = new(atomic.Int64)
		ls[i] = l
	}
	defer func() {
		for _, l := range ls {
			l.close()
		}
	}()
	res := make([]peerResult, len(impls))
	for _, g := range goroutineCounts {
		fmt.Fprintf(os.Stderr, "uncontended, %d goroutines ...\n", g)
		xs := make([][]float64, len(impls))
		for run := range runs {
			for _, i := range order(len(impls), run) {
				im := impls[i]
				xs[i] = append(xs[i], uncontended(ctx, ls[i], fmt.Sprintf("%s%s:u%d:%d:", prefix, im.name, g, run), g, dur))
			}
		}
		for i := range impls {
			slices.Sort(xs[i])
			res[i].uncontended = append(res[i].uncontended, xs[i][len(xs[i])/2])
		}
	}
	fmt.Fprintln(os.Stderr, "contended ...")
	cs := make([][]contendedResult, len(impls))
	hs := make([][]handOffResult, len(impls))
	for run := range runs {
		for _, i := range order(len(impls), run) {
			im := impls[i]
			cs[i] = append(cs[i], contended(ctx, ls[i], fmt.Sprintf("%s%s:c%d", prefix, im.name, run), 16, dur))
			hs[i] = append(hs[i], handOff(ctx, ls[i], fmt.Sprintf("%s%s:h%d", prefix, im.name, run), handOffWaiters, dur))
		}
	}
	for i := range impls {
		res[i].contended = medianContended(cs[i])
		pick := func(f func(h handOffResult) time.Duration) time.Duration {
			var xs []time.Duration
			for _, h := range hs[i] {
				xs = append(xs, f(h))
			}
			slices.Sort(xs)
			return xs[len(xs)/2]
		}
		res[i].hand = handOffResult{
			retP50:  pick(func(h handOffResult) time.Duration { return h.retP50 }),
			retP99:  pick(func(h handOffResult) time.Duration { return h.retP99 }),
			callP50: pick(func(h handOffResult) time.Duration { return h.callP50 }),
			callP99: pick(func(h handOffResult) time.Duration { return h.callP99 }),
		}
		res[i].stalls = ls[i].stalls.Load()
	}

	fmt.Printf("\n| | %s |\n|---|", strings.Join(names(impls), " | "))
	for range impls {
		fmt.Print("---|")
	}
	fmt.Println()
	row := func(label string, cell func(i int) string) {
		fmt.Printf("| %s |", label)
		for i := range impls {
			fmt.Printf(" %s |", cell(i))
		}
		fmt.Println()
	}
	for gi, g := range goroutineCounts {
		row(fmt.Sprintf("uncontended, %d goroutine%s (pairs/s)", g, map[bool]string{true: "s"}[g > 1]), func(i int) string {
			if i == 0 {
				return si(res[0].uncontended[gi])
			}
			return fmt.Sprintf("%.2fx", res[i].uncontended[gi]/res[0].uncontended[gi])
		})
	}
	rt := func(d time.Duration) string { return fmt.Sprintf("%s (%.1fx)", us(d), float64(d)/float64(rtt)) }
	row(fmt.Sprintf("hand-off from unlock returned, p50 (%d waiters; x %s round trip %s)", handOffWaiters, rttName, us(rtt)), func(i int) string { return rt(res[i].hand.retP50) })
	row("hand-off from unlock returned, p99", func(i int) string { return rt(res[i].hand.retP99) })
	row("hand-off from unlock called, p50", func(i int) string { return rt(res[i].hand.callP50) })
	row("hand-off from unlock called, p99", func(i int) string { return rt(res[i].hand.callP99) })
	row("contended 16 on 1 key: p99 wait", func(i int) string { return ms(res[i].contended.p99) })
	row("contended: max/min acquisitions per goroutine", func(i int) string { return fmt.Sprintf("%.2f", res[i].contended.maxMin) })
	row("contended: acquisitions/s", func(i int) string {
		if i == 0 {
			return si(res[0].contended.perSec)
		}
		return fmt.Sprintf("%.2fx", res[i].contended.perSec/res[0].contended.perSec)
	})
	row("contended: exclusion violations", func(i int) string { return fmt.Sprint(res[i].contended.violations) })
	row(fmt.Sprintf("lock calls stalled > %v (all runs)", stallAfter), func(i int) string { return fmt.Sprint(res[i].stalls) })
}
