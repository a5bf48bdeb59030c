package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The dedup benchmark counts messages deduplicated per second: every message
// is new (the common case on a healthy broker), and a row's call takes one
// message id or a batch of them. Rows of one table run on the same Redis in
// the same run, taking turns; ratios are to the table's first row, within a
// run.

// dedupRetention is the naive guard's EX and every store's retention.
const dedupRetention = 24 * time.Hour

// dedupCase is one row: open returns the call that deduplicates a batch of
// ids (of length batch) and reports how many of them were processed; close
// releases what open made.
type dedupCase struct {
	name  string
	batch int
	open  func(c *redis.Client, prefix string) (call func(context.Context, []string) (int, error), close func())
}

// bloomCapacity sizes the benchmark's filters: above the ids one row adds in
// a run, so that rotation does not dominate.
const bloomCapacity = 2_000_000

func newBenchFilter(c *redis.Client, prefix string) *bloomfilter.Filter {
	f, err := bloomfilter.New(c, "bench", bloomCapacity, 0.01, bloomfilter.WithPrefix(prefix))
	if err != nil {
		panic(err) // constant, valid arguments
	}
	return f
}

// cycle runs the full claim -> handle -> done cycle of a dedup.Deduper on s,
// one message at a time, with a handler that does nothing.
func cycle(s dedup.Store) func(context.Context, []string) (int, error) {
	d, err := dedup.New(s, dedup.WithRetention(dedupRetention))
	if err != nil {
		panic(err)
	}
	return func(ctx context.Context, ids []string) (int, error) {
		n := 0
		for _, id := range ids {
			o, err := d.Process(ctx, dedup.Message{ID: id}, func(context.Context, dedup.Message) error { return nil })
			if err != nil {
				return n, err
			}
			if o == dedup.OutcomeProcessed {
				n++
			}
		}
		return n, nil
	}
}

// batchCycle claims ids in one ClaimBatch and marks each claimed one done.
func batchCycle(s dedup.BatchClaimer) func(context.Context, []string) (int, error) {
	return func(ctx context.Context, ids []string) (int, error) {
		cs, err := s.ClaimBatch(ctx, ids, dedup.DefaultProcessingTTL)
		if err != nil {
			return 0, err
		}
		n := 0
		for i, c := range cs {
			if c.State != dedup.Claimed {
				continue
			}
			if err := s.Done(ctx, ids[i], c.Token, dedupRetention); err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
}

func nothing() {}

var redisDedupCases = []dedupCase{
	{"naive `SET consumed:<id> 1 NX EX 86400`, one per message (claim only)", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		return func(ctx context.Context, ids []string) (int, error) {
			ok, err := c.SetNX(ctx, p+"consumed:"+ids[0], "1", dedupRetention).Result()
			if ok {
				return 1, err
			}
			return 0, err
		}, nothing
	}},
	{"dedup/redisstore Claim, one per message (claim only)", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		s := redisstore.New(c, redisstore.WithPrefix(p))
		return func(ctx context.Context, ids []string) (int, error) {
			cl, err := s.Claim(ctx, ids[0], dedup.DefaultProcessingTTL)
			if cl.State == dedup.Claimed {
				return 1, err
			}
			return 0, err
		}, nothing
	}},
	{"dedup/redisstore ClaimBatch, 100 per round trip (claim only)", 100, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		s := redisstore.New(c, redisstore.WithPrefix(p))
		return func(ctx context.Context, ids []string) (int, error) {
			cs, err := s.ClaimBatch(ctx, ids, dedup.DefaultProcessingTTL)
			n := 0
			for _, cl := range cs {
				if cl.State == dedup.Claimed {
					n++
				}
			}
			return n, err
		}, nothing
	}},
	{"dedup/redisstore full cycle (Claim, Done), one message at a time", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		return cycle(redisstore.New(c, redisstore.WithPrefix(p))), nothing
	}},
	{"dedup/redisstore full cycle, ClaimBatch of 100, then Done per message", 100, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		return batchCycle(redisstore.New(c, redisstore.WithPrefix(p))), nothing
	}},
	{"Bloom TestAndAdd, one per message", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		f := newBenchFilter(c, p)
		return func(ctx context.Context, ids []string) (int, error) {
			seen, err := f.TestAndAdd(ctx, ids[0])
			if seen {
				return 0, err
			}
			return 1, err
		}, nothing
	}},
	{"Bloom TestAndAddBatch, 100 per round trip", 100, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		f := newBenchFilter(c, p)
		return func(ctx context.Context, ids []string) (int, error) {
			seen, err := f.TestAndAddBatch(ctx, ids)
			n := 0
			for _, s := range seen {
				if !s {
					n++
				}
			}
			return n, err
		}, nothing
	}},
	{"Bloom alone (Lossy) full cycle, one message at a time", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		return cycle(bloomfilter.NewLossy(newBenchFilter(c, p))), nothing
	}},
	{"Bloom prefilter + dedup/redisstore full cycle, one message at a time", 1, func(c *redis.Client, p string) (func(context.Context, []string) (int, error), func()) {
		return cycle(bloomfilter.NewPrefilter(newBenchFilter(c, p+"bloom:"), redisstore.New(c, redisstore.WithPrefix(p)))), nothing
	}},
}

// watermillCall wraps a Watermill handler that does nothing in d's
// middleware and sends each id as a message with a small JSON payload.
func watermillCall(d *middleware.Deduplicator) func(context.Context, []string) (int, error) {
	var handled atomic.Int64
	h := d.Middleware(func(*message.Message) ([]*message.Message, error) { handled.Add(1); return nil, nil })
	return func(ctx context.Context, ids []string) (int, error) {
		n := 0
		for _, id := range ids {
			m := message.NewMessage(id, []byte(`{"order":"`+id+`","amount":100}`))
			m.SetContext(ctx)
			before := handled.Load()
			if _, err := h(m); err != nil {
				return n, err
			}
			if handled.Load() > before {
				n++
			}
		}
		return n, nil
	}
}

var memDedupCases = []dedupCase{
	{"Watermill `middleware.Deduplicator`, map repository, key = message UUID", 1, func(*redis.Client, string) (func(context.Context, []string) (int, error), func()) {
		repo, err := middleware.NewMapExpiringKeyRepository(dedupRetention)
		if err != nil {
			panic(err)
		}
		return watermillCall(&middleware.Deduplicator{
			KeyFactory: func(m *message.Message) (string, error) { return m.UUID, nil },
			Repository: repo,
		}), nothing
	}},
	{"Watermill `middleware.Deduplicator` defaults (Adler-32 of the payload, 1 min window)", 1, func(*redis.Client, string) (func(context.Context, []string) (int, error), func()) {
		return watermillCall(nil), nothing
	}},
	{"latchkey `dedup.New(dedup.FromIdem(memstore.New()))`, full cycle", 1, func(*redis.Client, string) (func(context.Context, []string) (int, error), func()) {
		return cycle(dedup.FromIdem(memstore.New())), nothing
	}},
}

// dedupThroughput runs g consumers for d, each with its own ids, and returns
// messages per second, the number of new messages that were not processed
// (dropped as duplicates) and the number of messages sent.
func dedupThroughput(ctx context.Context, call func(context.Context, []string) (int, error), prefix string, batch, g int, d time.Duration) (float64, int64, int64) {
	var n, dropped, failed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for i := range g {
		wg.Go(func() {
			ids := make([]string, batch)
			for k := 0; time.Now().Before(stop); k++ {
				for j := range ids {
					ids[j] = fmt.Sprintf("%sc%d:%d", prefix, i, k*batch+j)
				}
				got, err := call(ctx, ids)
				if err != nil {
					if failed.Add(1) <= 3 {
						fmt.Fprintln(os.Stderr, err)
					}
					continue
				}
				n.Add(int64(len(ids)))
				dropped.Add(int64(len(ids) - got))
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), dropped.Load(), n.Load()
}

// dedupConsumers are the consumer counts of the dedup tables.
var dedupConsumers = []int{1, 16}

// dedupTable measures cases and prints their table; ratios are to the first
// case, taken within each run.
func dedupTable(ctx context.Context, c *redis.Client, title, prefix string, runs int, d time.Duration, cases []dedupCase) {
	type row struct {
		perSec, ratio  [][]float64 // per consumer count, per run
		dropped, total int64
	}
	rows := make([]row, len(cases))
	for i := range rows {
		rows[i].perSec = make([][]float64, len(dedupConsumers))
		rows[i].ratio = make([][]float64, len(dedupConsumers))
	}
	for gi, g := range dedupConsumers {
		for run := range runs {
			v := make([]float64, len(cases))
			for i, dc := range cases {
				fmt.Fprintf(os.Stderr, "dedup: %s, %d consumers, run %d ...\n", dc.name, g, run+1)
				p := fmt.Sprintf("%sdedup:%d:g%d:r%d:", prefix, i, g, run)
				call, done := dc.open(c, p)
				var dropped, total int64
				v[i], dropped, total = dedupThroughput(ctx, call, p, dc.batch, g, d)
				done()
				rows[i].dropped += dropped
				rows[i].total += total
				rows[i].perSec[gi] = append(rows[i].perSec[gi], v[i])
				if c != nil {
					cleanup(ctx, c, p)
				}
			}
			for i := range cases {
				rows[i].ratio[gi] = append(rows[i].ratio[gi], v[i]/v[0])
			}
		}
	}
	fmt.Printf("\n%s, medians of %d runs of %v (messages/s; ratio to the first row, same run):\n\n", title, runs, d)
	fmt.Print("| messages/s |")
	for _, g := range dedupConsumers {
		fmt.Printf(" %d consumer%s |", g, map[bool]string{true: "s"}[g > 1])
	}
	fmt.Print(" new messages dropped (all runs) |\n|---|")
	for range dedupConsumers {
		fmt.Print("---|")
	}
	fmt.Println("---|")
	for i, dc := range cases {
		fmt.Printf("| %s |", dc.name)
		for gi := range dedupConsumers {
			if i == 0 {
				fmt.Printf(" %s |", si(medianOf(rows[i].perSec[gi])))
			} else {
				fmt.Printf(" %s (%.2fx) |", si(medianOf(rows[i].perSec[gi])), medianOf(rows[i].ratio[gi]))
			}
		}
		fmt.Printf(" %d of %d |\n", rows[i].dropped, rows[i].total)
	}
}

// dedupMemory prints what one processed id costs in Redis: a dedup/redisstore done
// record (MEMORY USAGE) against the Bloom filter's bits.
func dedupMemory(ctx context.Context, c *redis.Client, prefix string) {
	p := prefix + "dedup:memory:"
	defer cleanup(ctx, c, p)
	s := redisstore.New(c, redisstore.WithPrefix(p))
	const id = "orders-2026-11-30-000042" // a 24-byte id
	cl, err := s.Claim(ctx, id, time.Minute)
	if err == nil {
		err = s.Done(ctx, id, cl.Token, dedupRetention)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dedup memory:", err)
		return
	}
	exact, err := c.MemoryUsage(ctx, s.RecordKey(id)).Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dedup memory:", err)
		return
	}
	f := newBenchFilter(c, p)
	if _, err := f.TestAndAdd(ctx, id); err != nil {
		fmt.Fprintln(os.Stderr, "dedup memory:", err)
		return
	}
	bitmap, _ := c.MemoryUsage(ctx, f.Keys()[1]).Result()
	size := f.Sizing()
	fmt.Printf("\nBloom generation of %d ids at 1%%: m = %d bits (%d bytes), MEMORY USAGE %d bytes (%.2f bits per id with the allocator's rounding).\n",
		size.Capacity, size.Bits, size.Bits/8, bitmap, float64(bitmap)*8/float64(size.Capacity))
	fmt.Printf("\nMemory per processed id (24-byte id): dedup/redisstore done record %d bytes (MEMORY USAGE, key and expiry included);"+
		" Bloom at 1%%: %.2f bits = %.2f bytes per id per generation (m/n; two generations live), %.0fx less;"+
		" a single filter without ageing would need %.2f bits. Expected false-positive rate with both generations full: %.3f%%.\n",
		exact, size.BitsPerID(), size.BitsPerID()/8, float64(exact)*8/size.BitsPerID(), bloomfilter.OptimalBitsPerID(0.01), 100*size.ExpectedRate())
}

// dedupBench prints the Redis table, the in-process table, the memory
// line and the server-cost table; with costOnly, the cost table alone.
func dedupBench(ctx context.Context, addr, prefix string, runs int, d time.Duration, costOnly bool) {
	if !costOnly {
		c := newGoRedis(addr)
		defer c.Close()
		dedupTable(ctx, c, "Message dedup on Redis", prefix, runs, d, redisDedupCases)
		dedupTable(ctx, nil, "Message dedup in one process (no Redis)", prefix, runs, d, memDedupCases)
		dedupMemory(ctx, c, prefix)
	}
	if err := dedupServerCost(ctx, 3000, max(runs, 3)); err != nil {
		fmt.Fprintln(os.Stderr, "dedup server cost:", err)
	}
}

// dedupServerCost runs n messages of every Redis case, one consumer, on a
// private redis-server, runs times taking turns, and prints the medians of
// what each message costs Redis, three ways (testsvc.ServerCost): the time
// of the commands the client sent, each counted once (a script's time
// covers the commands it ran); INFO commandstats summed over every command,
// which counts a script's commands a second time under their own names (the
// figure this table gave before); and the server process's CPU time, which
// adds reading, parsing and answering each round trip. Command times
// exclude queueing, so they hold on a busy machine better than
// throughput. It needs redis-server on PATH.
func dedupServerCost(ctx context.Context, n, runs int) error {
	ss, cs, err := startRedises(1)
	if err != nil {
		return err
	}
	defer ss[0].stop()
	c := cs[0]
	defer c.Close()
	rt := &roundTrips{}
	c.AddHook(rt)
	sent := testsvc.CountCommands(c)
	type cost struct{ top, sum, cpu, cmds, rts []float64 }
	costs := make([]cost, len(redisDedupCases))
	for run := range runs {
		for i, dc := range redisDedupCases {
			p := fmt.Sprintf("cost:%d:%d:", i, run)
			call, done := dc.open(c, p)
			if _, err := call(ctx, dedupIDs(p+"warm:", 0, dc.batch)); err != nil { // loads the scripts
				return err
			}
			before, err := testsvc.ReadCommandStats(ctx, c)
			if err != nil {
				return err
			}
			sent0, rt0 := sent.Counts(), rt.n.Load()
			for k := 0; k < n; k += dc.batch {
				if _, err := call(ctx, dedupIDs(p, k, dc.batch)); err != nil {
					return err
				}
			}
			rts := rt.n.Load() - rt0
			after, err := testsvc.ReadCommandStats(ctx, c)
			if err != nil {
				return err
			}
			done()
			sc := after.Since(before, sent.Since(sent0))
			m := float64(n)
			costs[i].top = append(costs[i].top, sc.TopMicros/m)
			costs[i].sum = append(costs[i].sum, sc.Micros/m)
			costs[i].cpu = append(costs[i].cpu, sc.CPUMicros/m)
			costs[i].cmds = append(costs[i].cmds, float64(sc.Calls)/m)
			costs[i].rts = append(costs[i].rts, float64(rts)/m)
		}
	}
	fmt.Printf("\nWhat a message costs Redis (private redis-server, %d new messages, one consumer, medians of %d runs taking turns):"+
		" commands' time with each command the client sent counted once, a script's covering the commands it runs;"+
		" the same commandstats summed over every command, which counts a script's commands twice (the figure given before);"+
		" the server's CPU time, which adds reading, parsing and answering each round trip:\n\n", n, runs)
	fmt.Println("| | Redis µs per message, each sent command once | commandstats summed (scripts' commands twice) | server CPU µs per message | commands run per message | round trips per message |\n|---|---|---|---|---|---|")
	for i, dc := range redisDedupCases {
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", dc.name, medianOf(costs[i].top), medianOf(costs[i].sum),
			medianOf(costs[i].cpu), medianOf(costs[i].cmds), medianOf(costs[i].rts))
	}
	return nil
}

func dedupIDs(prefix string, from, n int) []string {
	ids := make([]string, n)
	for j := range ids {
		ids[j] = fmt.Sprintf("%s%d", prefix, from+j)
	}
	return ids
}
