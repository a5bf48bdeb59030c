// Command bench measures latchkey's Redis lock against raw go-redis,
// bsm/redislock, go-redsync/redsync and rueidis's rueidislock on one Redis,
// in one process and one run, and prints a Markdown table of medians. It
// also writes the tables to results.md (-md) and draws them in results.svg
// (-svg, see chart.go).
//
//	cd bench && go run .            # against 127.0.0.1:6379
//	go run . -addr host:port -runs 5 -d 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/lock/redislock"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	runs := flag.Int("runs", 3, "runs per measurement (the median is reported)")
	dur := flag.Duration("d", time.Second, "length of one run")
	only := flag.String("only", "", "comma-separated implementations to run (default all)")
	held := flag.Int("held", 10000, "leases held in the holding test (0 skips it)")
	holdFor := flag.Duration("hold", 11*time.Second, "how long the holding test holds (renewal every TTL/3 = 10 s)")
	etcdTable := flag.Bool("etcd", false, "measure etcdlock against etcd's concurrency.Mutex on a private etcd (needs etcd on PATH)")
	redlockTable := flag.Bool("redlock", false, "measure redlock against redsync on 5 private redis-servers (needs redis-server on PATH)")
	electTable := flag.Bool("elect", false, "measure leader election failover and resign hand-over on Redis, PostgreSQL (-pg) and a private etcd, next to etcd's concurrency.Election")
	electN := flag.Int("elect-n", 100, "resign hand-overs per implementation in the election table (failovers: a tenth)")
	rwTable := flag.Bool("rw", false, "measure read-write locks (rwlock) next to each backend's lock: Redis (-addr), PostgreSQL (-pg), SQLite, and etcd with -etcd")
	rwOnly := flag.String("rw-only", "", "comma-separated backends of the -rw table (Redis, PostgreSQL, SQLite, etcd; default all)")
	semTable := flag.Bool("semaphore", false, "measure the semaphores (1, 4, 16 permits) next to the lock on Redis, PostgreSQL (-pg), SQLite, and etcd with -etcd")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	gs := flag.String("g", "1,2,4,8,16,32,64,128,256", "goroutine counts of the uncontended test")
	lockCost := flag.Int("lock-cost", 6400, "pairs per implementation in the table of what a pair costs a private redis-server (0 skips it; needs redis-server on PATH)")
	fullDuplex := flag.Bool("latchkey-fullduplex", false, "add a latchkey column sending through go-redis's full-duplex automatic pipelining (batching off), to measure a streaming transport beside the default")
	fixedSends := flag.String("latchkey-sends", "", "comma-separated fixed sends in flight to add as latchkey columns beside the adaptive default (redislock.WithSendsInFlight), to compare with it")
	skipContended := flag.Bool("nocontended", false, "skip the contended test")
	lockTable := flag.Bool("lock", true, "measure the locks")
	idemTable := flag.Bool("idem", true, "measure idempotency against the hand-written SET NX guard")
	idemG := flag.Int("idem-g", 64, "concurrent clients of the idempotency test")
	idemOnly := flag.String("idem-only", "", "comma-separated idempotency implementations to run (default all)")
	dedupTables := flag.Bool("dedup", true, "measure message dedup (dedup/redisstore, the Bloom filter) against the naive SET NX and Watermill's deduplicator")
	dedupCostOnly := flag.Bool("dedup-cost-only", false, "of the dedup tables, print only what a message costs Redis (on a private redis-server)")
	svgFile := flag.String("svg", "results.svg", "write the results chart (SVG) here (empty: no chart)")
	mdFile := flag.String("md", "results.md", "write the results (Markdown, as printed) here (empty: no file)")
	chartOnly := flag.String("chart-from", "", "only draw the chart of this results file (written by -md) into -svg")
	otelTable := flag.Bool("otel", false, "measure what latchkeyotel's spans and metrics cost, on a real SDK exporting to a discarding OTLP endpoint")
	flag.Parse()
	if *chartOnly != "" {
		if err := chartFrom(*chartOnly, *svgFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	results, err := captureStdout()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() {
		if err := results.finish(*mdFile, *svgFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	for _, f := range strings.Split(*gs, ",") {
		var g int
		fmt.Sscan(f, &g)
		goroutineCounts = append(goroutineCounts, g)
	}
	ctx := context.Background()
	impls := implementations(*addr)
	for _, f := range strings.Split(*fixedSends, ",") {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			name := fmt.Sprintf("latchkey-sends-%d", n)
			impls = append(impls, impl{name, func() (locker, error) { return openLatchkey(*addr, redislock.WithSendsInFlight(n)) }})
		}
	}
	if *fullDuplex {
		impls = append(impls, impl{"latchkey-fullduplex", func() (locker, error) { return openLatchkeyFullDuplex(*addr) }})
	}
	if *only != "" {
		keep := strings.Split(*only, ",")
		impls = slices.DeleteFunc(impls, func(i impl) bool { return !slices.Contains(keep, i.name) })
	}
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	// The locks' fencing counters outlive their locks by a day: remove this
	// run's keys, so runs do not fill the server that tests share.
	defer func() {
		c := newGoRedis(*addr)
		cleanup(ctx, c, prefix)
		c.Close()
	}()
	if *lockTable {
		lockBench(ctx, impls, prefix, *runs, *dur, *skipContended)
		if slices.ContainsFunc(impls, func(i impl) bool { return i.name == "latchkey" }) {
			lockSendsTable(ctx, *addr, prefix, goroutineCounts, *runs, *dur)
		}
		if *lockCost > 0 {
			if err := lockServerCost(ctx, impls, *lockCost, *runs); err != nil {
				fmt.Fprintln(os.Stderr, "lock server cost:", err)
			}
		}
		if *held > 0 && (*only == "" || strings.Contains(*only, "latchkey")) {
			holdingBench(ctx, *addr, prefix, *held, *holdFor)
		}
	}
	if *etcdTable {
		if err := etcdBench(ctx, prefix, *runs, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "etcd:", err)
			os.Exit(1)
		}
	}
	if *redlockTable {
		if err := redlockBench(ctx, prefix, *runs, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "redlock:", err)
			os.Exit(1)
		}
	}
	if *electTable {
		if err := electBench(ctx, *addr, *sqlPG, prefix, *electN, max(*electN/10, 1)); err != nil {
			fmt.Fprintln(os.Stderr, "election:", err)
			os.Exit(1)
		}
	}
	if *rwTable {
		rwBench(ctx, *addr, *sqlPG, prefix, *runs, *dur, *etcdTable, *rwOnly)
	}
	if *semTable {
		semaphoreBench(ctx, *addr, *sqlPG, prefix, *runs, *dur, *held, *holdFor, *etcdTable)
	}
	if *idemTable {
		im := idemImplementations()
		if *idemOnly != "" {
			keep := strings.Split(*idemOnly, ",")
			im = slices.DeleteFunc(im, func(i idemImpl) bool { return !slices.Contains(keep, i.name) })
		}
		idemBench(ctx, *addr, prefix, *runs, *idemG, *dur, im)
	}
	if *dedupTables {
		dedupBench(ctx, *addr, prefix, *runs, *dur, *dedupCostOnly)
	}
	if *sqlTable {
		sqlBench(ctx, *runs, *dur)
	}
	if *sqlLockTable {
		sqlLockBench(ctx, *runs, *dur, *sqlLockOnly)
	}
	if *otelTable {
		if err := otelBench(ctx, *addr, prefix, *runs, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "otel:", err)
			os.Exit(1)
		}
	}
}

// lockBench measures impls side by side: every run of a measurement runs
// each implementation in turn (forwards in even runs, backwards in odd
// ones), so load from elsewhere on the machine falls on all of them alike
// and the ratios compare figures taken within the same second or two.
func lockBench(ctx context.Context, impls []impl, prefix string, runs int, dur time.Duration, skipContended bool) {
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
	rs := make([]*result, len(impls))
	for i := range rs {
		rs[i] = &result{}
	}
	for _, g := range goroutineCounts {
		fmt.Fprintf(os.Stderr, "uncontended, %d goroutines ...\n", g)
		xs := make([][]float64, len(impls))
		for run := range runs {
			for _, i := range order(len(impls), run) {
				xs[i] = append(xs[i], uncontended(ctx, ls[i], fmt.Sprintf("%s%s:u%d:%d:", prefix, impls[i].name, g, run), g, dur))
			}
		}
		for i := range impls {
			slices.Sort(xs[i])
			rs[i].uncontended = append(rs[i].uncontended, xs[i][len(xs[i])/2])
		}
	}
	cs := make([][]contendedResult, len(impls))
	if !skipContended {
		fmt.Fprintln(os.Stderr, "contended ...")
	}
	for run := range runs {
		for _, i := range order(len(impls), run) {
			if skipContended {
				cs[i] = append(cs[i], contendedResult{})
				continue
			}
			cs[i] = append(cs[i], contended(ctx, ls[i], fmt.Sprintf("%s%s:c%d", prefix, impls[i].name, run), 16, dur))
		}
	}
	res := map[string]*result{}
	for i, im := range impls {
		rs[i].contended = medianContended(cs[i])
		rs[i].stalls = ls[i].stalls.Load()
		ls[i].close()
		res[im.name] = rs[i]
	}
	printTable(impls, res)
}

func holdingBench(ctx context.Context, addr, prefix string, held int, holdFor time.Duration) {
	fmt.Fprintf(os.Stderr, "holding %d leases for %v ...\n", held, holdFor)
	h := holding(ctx, addr, prefix+"held:", held, holdFor)
	fmt.Printf("\nlatchkey holding %d leases (TTL 30 s, renewed every 10 s) for %v:\n", held, holdFor)
	fmt.Printf("- round trips per renewal tick: %.2f (%d round trips, %d renewal ticks, %d renewals)\n",
		h.perTick, h.roundTrips, h.ticks, h.renewals)
	fmt.Printf("- extra memory: %.1f MiB heap in use, %.1f MiB resident\n", h.heapMiB, h.rssMiB)
	fmt.Printf("- CPU while holding: %.1f ms per second\n", h.cpuPerSec*1000)
	fmt.Printf("- leases lost: %d\n", h.lost)
}

var goroutineCounts []int

type result struct {
	uncontended []float64 // pairs/s at 1, 16, 64 goroutines
	contended   contendedResult
	stalls      int64
}

func median(runs int, f func(run int) float64) float64 {
	var xs []float64
	for i := range runs {
		xs = append(xs, f(i))
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func printTable(impls []impl, res map[string]*result) {
	base := res[impls[0].name]
	fmt.Printf("\n| | %s |\n|---|", strings.Join(names(impls), " | "))
	for range impls {
		fmt.Print("---|")
	}
	fmt.Println()
	ratio := func(v, b float64, first bool) string {
		if first {
			return si(v)
		}
		return fmt.Sprintf("%.2fx", v/b)
	}
	for gi, g := range goroutineCounts {
		fmt.Printf("| uncontended, %d goroutine%s (pairs/s) |", g, map[bool]string{true: "s"}[g > 1])
		for i, im := range impls {
			fmt.Printf(" %s |", ratio(res[im.name].uncontended[gi], base.uncontended[gi], i == 0))
		}
		fmt.Println()
	}
	fmt.Print("| contended 16 on 1 key: p99 wait |")
	for _, im := range impls {
		fmt.Printf(" %s |", ms(res[im.name].contended.p99))
	}
	fmt.Print("\n| contended: max/min acquisitions per goroutine |")
	for _, im := range impls {
		fmt.Printf(" %.2f |", res[im.name].contended.maxMin)
	}
	fmt.Print("\n| contended: acquisitions/s |")
	for i, im := range impls {
		fmt.Printf(" %s |", ratio(res[im.name].contended.perSec, base.contended.perSec, i == 0))
	}
	fmt.Print("\n| contended: exclusion violations |")
	for _, im := range impls {
		fmt.Printf(" %d |", res[im.name].contended.violations)
	}
	fmt.Printf("\n| lock calls stalled > %v (all runs) |", stallAfter)
	for _, im := range impls {
		fmt.Printf(" %d |", res[im.name].stalls)
	}
	fmt.Println()
}

func names(impls []impl) []string {
	var out []string
	for _, im := range impls {
		out = append(out, im.name)
	}
	return out
}

func si(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
