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

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// A sendMeter is a go-redis hook that counts a client's sends (a command
// sent alone, or a pipeline), the calls they carried, and how many of the
// client's sends were on their way when each left (itself included).
type sendMeter struct {
	inFlight atomic.Int64
	sends    atomic.Int64
	calls    atomic.Int64
	flight   atomic.Int64 // sum over sends of inFlight when it left
}

func (m *sendMeter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (m *sendMeter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer m.leave(1)()
		return next(ctx, cmd)
	}
}

func (m *sendMeter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer m.leave(len(cmds))()
		return next(ctx, cmds)
	}
}

// leave counts a send of calls calls and returns what ends it.
func (m *sendMeter) leave(calls int) func() {
	m.flight.Add(m.inFlight.Add(1))
	m.sends.Add(1)
	m.calls.Add(int64(calls))
	return func() { m.inFlight.Add(-1) }
}

// lockSendsTable shows how a latchkey Locker's batching follows the load:
// at each goroutine count of the uncontended test, the sends (commands
// alone or pipelines) it had in flight, the calls each carried and the
// round trips a pair cost, counted by a hook on its go-redis client.
func lockSendsTable(ctx context.Context, addr, prefix string, gs []int, runs int, d time.Duration) {
	fmt.Fprintln(os.Stderr, "latchkey's sends in flight ...")
	fmt.Printf("\nHow latchkey's batching follows the load (uncontended, default options; medians of %d runs of %v;"+
		" counted by a go-redis hook on its client):\n\n", runs, d)
	fmt.Println("| goroutines | pairs/s | sends in flight when one leaves (mean) | calls per send | round trips per pair |\n|---|---|---|---|---|")
	for _, g := range gs {
		var rate, flight, per, rts []float64
		for run := range runs {
			c := newGoRedis(addr)
			m := &sendMeter{}
			c.AddHook(m)
			l, err := redislock.New(c)
			if err != nil {
				fmt.Fprintln(os.Stderr, "latchkey:", err)
				c.Close()
				return
			}
			lk := latchkeyLocker(l)
			lk.stalls = new(atomic.Int64)
			r := uncontended(ctx, lk, fmt.Sprintf("%ssends:%d:%d:", prefix, g, run), g, d)
			pairs := r * d.Seconds()
			sends := float64(m.sends.Load())
			rate = append(rate, r)
			flight = append(flight, float64(m.flight.Load())/sends)
			per = append(per, float64(m.calls.Load())/sends)
			rts = append(rts, sends/pairs)
			l.Close()
			c.Close()
		}
		fmt.Printf("| %d | %s | %.2f | %.2f | %.2f |\n", g, si(medianOf(rate)), medianOf(flight), medianOf(per), medianOf(rts))
	}
}

// lockServerCost runs n pairs of every implementation on a private
// redis-server, with 1, 16 and 64 goroutines, runs times taking turns, and
// prints the medians of what a pair costs: the commands the server ran (a
// script and each command in it), their time (INFO commandstats, which
// counts a script's commands within the script's own time too), the server
// process's CPU time, which adds reading, parsing and answering each round
// trip (what batching saves), and this process's CPU time, the client's
// side of the same work. The two CPU times show where a pair's time goes
// on a machine the client and the server share. It needs redis-server on
// PATH.
func lockServerCost(ctx context.Context, impls []impl, n, runs int) error {
	ss, cs, err := startRedises(1)
	if err != nil {
		return err
	}
	defer ss[0].stop()
	c := cs[0]
	defer c.Close()
	addr := c.Options().Addr
	all := implementations(addr)
	var opened []impl
	for _, im := range all {
		if slices.ContainsFunc(impls, func(o impl) bool { return o.name == im.name }) {
			opened = append(opened, im)
		}
	}
	ls := make([]locker, len(opened))
	for i, im := range opened {
		if ls[i], err = im.open(); err != nil {
			return fmt.Errorf("%s: %w", im.name, err)
		}
		ls[i].stalls = new(atomic.Int64)
		defer ls[i].close()
	}
	gs := []int{1, 16, 64}
	type cost struct{ cmds, us, cpu, client [][]float64 } // by goroutine count, then run
	costs := make([]cost, len(opened))
	for i := range costs {
		costs[i] = cost{cmds: make([][]float64, len(gs)), us: make([][]float64, len(gs)),
			cpu: make([][]float64, len(gs)), client: make([][]float64, len(gs))}
	}
	for run := range runs {
		for gi, g := range gs {
			for _, i := range order(len(opened), run) {
				p := fmt.Sprintf("cost:%d:%d:%d:", i, g, run)
				if err := pairs(ctx, ls[i], p+"warm:", 1, 1); err != nil { // loads the scripts
					return fmt.Errorf("%s: %w", opened[i].name, err)
				}
				before, err := testsvc.ReadCommandStats(ctx, c)
				if err != nil {
					return err
				}
				client := cpuTime()
				if err := pairs(ctx, ls[i], p, g, n); err != nil {
					return fmt.Errorf("%s: %w", opened[i].name, err)
				}
				client = cpuTime() - client
				after, err := testsvc.ReadCommandStats(ctx, c)
				if err != nil {
					return err
				}
				sc := after.Since(before, nil)
				costs[i].cmds[gi] = append(costs[i].cmds[gi], float64(sc.Calls)/float64(n))
				costs[i].us[gi] = append(costs[i].us[gi], sc.Micros/float64(n))
				costs[i].cpu[gi] = append(costs[i].cpu[gi], sc.CPUMicros/float64(n))
				costs[i].client[gi] = append(costs[i].client[gi], float64(client)/float64(time.Microsecond)/float64(n))
			}
		}
	}
	fmt.Printf("\nWhat an uncontended pair costs (private redis-server, %d pairs, medians of %d runs taking turns):"+
		" commands run (a script and each command in it), their time in INFO commandstats, the server's CPU time,"+
		" which adds reading, parsing and answering each round trip, and the client's (this process's) CPU time:\n\n", n, runs)
	fmt.Printf("| | %s |\n|---|%s\n", strings.Join(names(opened), " | "), strings.Repeat("---|", len(opened)))
	row := func(label string, f func(i int) string) {
		fmt.Printf("| %s |", label)
		for i := range opened {
			fmt.Printf(" %s |", f(i))
		}
		fmt.Println()
	}
	row("commands run per pair", func(i int) string { return fmt.Sprintf("%.2f", medianOf(costs[i].cmds[0])) })
	row("commands' time per pair (µs)", func(i int) string { return fmt.Sprintf("%.2f", medianOf(costs[i].us[0])) })
	for gi, g := range gs {
		row(fmt.Sprintf("server CPU per pair, %d goroutine%s (µs)", g, map[bool]string{true: "s"}[g > 1]),
			func(i int) string { return fmt.Sprintf("%.2f", medianOf(costs[i].cpu[gi])) })
	}
	for gi, g := range gs {
		row(fmt.Sprintf("client CPU per pair, %d goroutine%s (µs)", g, map[bool]string{true: "s"}[g > 1]),
			func(i int) string { return fmt.Sprintf("%.2f", medianOf(costs[i].client[gi])) })
	}
	return nil
}

// pairs runs n acquire-release pairs of l spread over g goroutines, each on
// its own keys.
func pairs(ctx context.Context, l locker, prefix string, g, n int) error {
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s%d", prefix, i)
			for k := i; k < n; k += g {
				unlock, cancel, err := tryBounded(ctx, l, key)
				if err == nil {
					err = unlock(ctx)
					cancel()
				}
				if err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
