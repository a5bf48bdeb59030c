package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// The SQL benchmark puts lock/sqllock and idem/sqlstore on SQLite,
// PostgreSQL (through database/sql and through a pgx pool) and MariaDB side
// by side, in one process and one run: lock pairs per second, uncontended
// and contended, and idempotency first requests and replays per second, each
// with the round trips it cost, counted on the client (internal/sqlcount).
// Ratios are to PostgreSQL through database/sql.
var (
	sqlTable = flag.Bool("sql", false, "measure lock/sqllock and idem/sqlstore on SQLite, PostgreSQL (database/sql and pgx) and MariaDB")
	sqlPG    = flag.String("pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL of the -sql, -elect, -rw and -semaphore tables (empty: the election and semaphore tables leave it out)")
	sqlMySQL = flag.String("mysql", "root@tcp(127.0.0.1:3306)/test", "MySQL or MariaDB DSN (go-sql-driver) of the -sql table")
	sqlConns = flag.Int("sql-conns", 20, "connections of each SQL pool (SQLite: 1, as lock/sqllock's doc advises)")
)

// A sqlTarget is one column: a way to reach one database.
type sqlTarget struct {
	name string
	// open connects, counting round trips on c, and returns the lock and
	// the store on tables named after prefix, and a function that drops
	// them and closes.
	open func(ctx context.Context, c *sqlcount.Counter, prefix string) (lock.Locker, *sqlstore.Store, func(), error)
}

func sqlTargets() []sqlTarget {
	dir, _ := os.MkdirTemp("", "latchkey-bench-sql-")
	std := func(driver, dsn string, d sqllock.Dialect) func(context.Context, *sqlcount.Counter, string) (lock.Locker, *sqlstore.Store, func(), error) {
		return func(ctx context.Context, c *sqlcount.Counter, prefix string) (lock.Locker, *sqlstore.Store, func(), error) {
			db, err := sqlcount.Open(driver, dsn, c)
			if err != nil {
				return nil, nil, nil, err
			}
			n := *sqlConns
			if d == sqllock.SQLite {
				n = 1
			}
			db.SetMaxOpenConns(n)
			db.SetMaxIdleConns(n)
			drop := func(tables ...string) {
				for _, t := range tables {
					_, _ = db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t)
				}
				_ = db.Close()
			}
			l, err := sqllock.New(ctx, db, d, sqllock.WithTable(prefix+"locks"))
			if err != nil {
				drop()
				return nil, nil, nil, err
			}
			s, err := sqlstore.New(db, sqlstore.WithTable(prefix+"idem"), sqlstore.WithTokenTable(prefix+"tok"))
			if err == nil {
				err = s.Migrate(ctx)
			}
			if err != nil {
				_ = l.Close()
				drop(prefix+"locks", prefix+"locks_queue")
				return nil, nil, nil, err
			}
			return l, s, func() { _ = l.Close(); drop(prefix+"locks", prefix+"locks_queue", prefix+"idem", prefix+"tok") }, nil
		}
	}
	pgx := func(ctx context.Context, c *sqlcount.Counter, prefix string) (lock.Locker, *sqlstore.Store, func(), error) {
		cfg, err := pgxpool.ParseConfig(*sqlPG)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.ConnConfig.Tracer = c.Tracer()
		cfg.MaxConns = int32(*sqlConns)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		drop := func(tables ...string) {
			for _, t := range tables {
				_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t)
			}
			pool.Close()
		}
		l, err := sqllock.NewPgx(ctx, pool, sqllock.WithTable(prefix+"locks"))
		if err != nil {
			drop()
			return nil, nil, nil, err
		}
		s, err := sqlstore.NewPgx(pool, sqlstore.WithTable(prefix+"idem"), sqlstore.WithTokenTable(prefix+"tok"))
		if err == nil {
			err = s.Migrate(ctx)
		}
		if err != nil {
			_ = l.Close()
			drop(prefix+"locks", prefix+"locks_queue")
			return nil, nil, nil, err
		}
		return l, s, func() { _ = l.Close(); drop(prefix+"locks", prefix+"locks_queue", prefix+"idem", prefix+"tok") }, nil
	}
	sep := "?"
	if strings.Contains(*sqlMySQL, "?") {
		sep = "&"
	}
	return []sqlTarget{
		{"postgres (database/sql)", std("pgx", *sqlPG, sqllock.Postgres)},
		{"postgres (pgx)", pgx},
		{"mariadb", std("mysql", *sqlMySQL+sep+"interpolateParams=true", sqllock.MySQL)},
		{"mariadb (prepared)", std("mysql", *sqlMySQL, sqllock.MySQL)},
		{"sqlite", std("sqlite", "file:"+filepath.Join(dir, "bench.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", sqllock.SQLite)},
	}
}

// sqlResult is one column's numbers.
type sqlResult struct {
	u1, u16         float64 // lock pairs/s, uncontended
	rtPair          float64 // round trips per acquire + release
	contended       contendedResult
	first, replay   float64 // idempotency requests/s
	rtFirst, rtRepl float64 // round trips per request
	stalls          int64
}

// sqlG is the concurrency of the idempotency rows.
const sqlG = 16

func sqlBench(ctx context.Context, runs int, d time.Duration) {
	targets := sqlTargets()
	type opened struct {
		c  *sqlcount.Counter
		lk locker
		s  *sqlstore.Store
	}
	ops := make([]opened, len(targets))
	stamp := time.Now().UnixNano() % 1e9
	for i, tg := range targets {
		c := new(sqlcount.Counter)
		l, s, done, err := tg.open(ctx, c, fmt.Sprintf("bench_%d_%d_", stamp, i))
		if err != nil {
			fmt.Fprintf(os.Stderr, "sql: %s: %v\n", tg.name, err)
			os.Exit(1)
		}
		defer done()
		lk := locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, lock.WithWait(stallAfter))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		}, stalls: new(atomic.Int64)}
		ops[i] = opened{c, lk, s}
	}
	// Each measurement runs on every column in turn, run after run, so that
	// load coming and going on the machine falls on all columns alike.
	each := func(what string, f func(run, i int) float64) [][]float64 {
		fmt.Fprintf(os.Stderr, "sql: %s ...\n", what)
		out := make([][]float64, len(targets))
		for run := range runs {
			for i := range targets {
				out[i] = append(out[i], f(run, i))
			}
		}
		return out
	}
	res := make([]sqlResult, len(targets))
	rtPair := make([][]float64, len(targets))
	u1 := each("lock, 1 goroutine", func(run, i int) float64 {
		before := ops[i].c.Load()
		start := time.Now()
		v := uncontended(ctx, ops[i].lk, fmt.Sprintf("u1:%d:", run), 1, d)
		if n := v * time.Since(start).Seconds(); n > 0 {
			rtPair[i] = append(rtPair[i], float64(ops[i].c.Load()-before)/n)
		}
		return v
	})
	u16 := each("lock, 16 goroutines", func(run, i int) float64 {
		return uncontended(ctx, ops[i].lk, fmt.Sprintf("u16:%d:", run), 16, d)
	})
	cs := make([][]contendedResult, len(targets))
	each("lock, contended", func(run, i int) float64 {
		cs[i] = append(cs[i], contended(ctx, ops[i].lk, fmt.Sprintf("c:%d", run), 16, d))
		return 0
	})
	rtFirst, rtRepl := make([][]float64, len(targets)), make([][]float64, len(targets))
	first := each("idempotency, first requests", func(run, i int) float64 {
		v, rt := sqlIdem(ctx, ops[i].s, ops[i].c, fmt.Sprintf("first:%d:", run), false, d)
		rtFirst[i] = append(rtFirst[i], rt)
		return v
	})
	replay := each("idempotency, replays", func(run, i int) float64 {
		v, rt := sqlIdem(ctx, ops[i].s, ops[i].c, fmt.Sprintf("replay:%d:", run), true, d)
		rtRepl[i] = append(rtRepl[i], rt)
		return v
	})
	for i := range targets {
		res[i] = sqlResult{
			u1: medianOf(u1[i]), u16: medianOf(u16[i]), rtPair: medianOf(rtPair[i]),
			contended: medianContended(cs[i]), stalls: ops[i].lk.stalls.Load(),
			first: medianOf(first[i]), replay: medianOf(replay[i]),
			rtFirst: medianOf(rtFirst[i]), rtRepl: medianOf(rtRepl[i]),
		}
	}
	printSQLTable(targets, res, runs, d)
}

// sqlIdem runs sqlG clients through idem.Do for d, each on keys of its own:
// a new key every request (first requests: claim, run, record), or one
// recorded key again and again (replays). It returns requests per second and
// round trips per request.
func sqlIdem(ctx context.Context, s *sqlstore.Store, c *sqlcount.Counter, prefix string, replay bool, d time.Duration) (perSec, perReq float64) {
	do := func(key string) error {
		p, err := idem.Do(ctx, s, key, pay, idem.WithRetention(guardTTL))
		if err == nil && p.Charge != "ch_1" {
			err = fmt.Errorf("idem.Do: unexpected %v", p)
		}
		return err
	}
	if replay {
		for g := range sqlG {
			if err := do(fmt.Sprintf("%s%d", prefix, g)); err != nil {
				fmt.Fprintln(os.Stderr, "sql: idem:", err)
				os.Exit(1)
			}
		}
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	before := c.Load()
	stop := time.Now().Add(d)
	start := time.Now()
	for g := range sqlG {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				key := fmt.Sprintf("%s%d", prefix, g)
				if !replay {
					key = fmt.Sprintf("%s%d:%d", prefix, g, i)
				}
				if err := do(key); err != nil {
					fmt.Fprintln(os.Stderr, "sql: idem:", err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n.Load() == 0 {
		return 0, 0
	}
	return float64(n.Load()) / elapsed.Seconds(), float64(c.Load()-before) / float64(n.Load())
}

func printSQLTable(targets []sqlTarget, res []sqlResult, runs int, d time.Duration) {
	fmt.Printf("\nSQL: lock/sqllock and idem/sqlstore, medians of %d runs of %v; ratios to the first column; round trips counted on the client:\n", runs, d)
	fmt.Print("\n| |")
	for _, t := range targets {
		fmt.Printf(" %s |", t.name)
	}
	fmt.Print("\n|---|")
	for range targets {
		fmt.Print("---|")
	}
	fmt.Println()
	row := func(label string, f func(r sqlResult) string) {
		fmt.Printf("| %s |", label)
		for i := range targets {
			fmt.Printf(" %s |", f(res[i]))
		}
		fmt.Println()
	}
	rate := func(label string, v func(r sqlResult) float64) {
		base := v(res[0])
		first := true
		row(label, func(r sqlResult) string {
			if first {
				first = false
				return si(v(r))
			}
			if base == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2fx", v(r)/base)
		})
	}
	rt := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	rate("lock uncontended, 1 goroutine (pairs/s)", func(r sqlResult) float64 { return r.u1 })
	row("round trips per acquire + release", func(r sqlResult) string { return rt(r.rtPair) })
	rate("lock uncontended, 16 goroutines (pairs/s)", func(r sqlResult) float64 { return r.u16 })
	rate("lock contended, 16 on 1 key (acquisitions/s)", func(r sqlResult) float64 { return r.contended.perSec })
	row("contended: p99 wait", func(r sqlResult) string { return ms(r.contended.p99) })
	row("contended: max/min acquisitions per goroutine", func(r sqlResult) string { return fmt.Sprintf("%.2f", r.contended.maxMin) })
	row("contended: exclusion violations", func(r sqlResult) string { return fmt.Sprint(r.contended.violations) })
	row(fmt.Sprintf("lock calls stalled > %v (all runs)", stallAfter), func(r sqlResult) string { return fmt.Sprint(r.stalls) })
	rate(fmt.Sprintf("idempotency first requests, %d clients (req/s)", sqlG), func(r sqlResult) float64 { return r.first })
	row("round trips per first request (claim, record)", func(r sqlResult) string { return rt(r.rtFirst) })
	rate(fmt.Sprintf("idempotency replays, %d clients (req/s)", sqlG), func(r sqlResult) float64 { return r.replay })
	row("round trips per replay", func(r sqlResult) string { return rt(r.rtRepl) })
}
