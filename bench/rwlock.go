package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// rwBackend is one backend of the read-write table: its lock and its
// read-write lock, opened on the same server.
type rwBackend struct {
	name string
	open func() (plain lock.Locker, rw *rwlock.Locker, closeFn func(), err error)
}

// rwBench measures, per backend and in one run, read and write
// acquire/release pairs of the read-write lock next to the backend's own
// lock: uncontended at the -g goroutine counts, and contended (16 on one
// key; readers share, so theirs is the cost of sharing, not of waiting).
func rwBench(ctx context.Context, addr, pgURL, prefix string, runs int, dur time.Duration, withEtcd bool, only string) {
	backends := []rwBackend{
		{"Redis", func() (lock.Locker, *rwlock.Locker, func(), error) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			l, err := redislock.New(c)
			if err != nil {
				return nil, nil, nil, err
			}
			rw, err := redislock.NewRW(c)
			if err != nil {
				return nil, nil, nil, err
			}
			return l, rw, func() { l.Close(); rw.Close(); forgetCounters(ctx, c, prefix+"rw:"); c.Close() }, nil
		}},
		{"PostgreSQL", func() (lock.Locker, *rwlock.Locker, func(), error) {
			pool, err := pgxpool.New(ctx, pgURL)
			if err != nil {
				return nil, nil, nil, err
			}
			l, err := sqllock.NewPgx(ctx, pool)
			if err != nil {
				pool.Close()
				return nil, nil, nil, err
			}
			rw, err := sqllock.NewPgxRW(ctx, pool)
			if err != nil {
				pool.Close()
				return nil, nil, nil, err
			}
			return l, rw, func() { l.Close(); rw.Close(); pool.Close() }, nil
		}},
		{"SQLite", func() (lock.Locker, *rwlock.Locker, func(), error) {
			dir, err := os.MkdirTemp("", "latchkey-bench-rw")
			if err != nil {
				return nil, nil, nil, err
			}
			db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
			if err != nil {
				return nil, nil, nil, err
			}
			l, err := sqllock.New(ctx, db, sqllock.SQLite)
			if err != nil {
				return nil, nil, nil, err
			}
			rw, err := sqllock.NewRW(ctx, db, sqllock.SQLite)
			if err != nil {
				return nil, nil, nil, err
			}
			return l, rw, func() { l.Close(); rw.Close(); db.Close(); os.RemoveAll(dir) }, nil
		}},
	}
	if withEtcd {
		backends = append(backends, rwBackend{"etcd", func() (lock.Locker, *rwlock.Locker, func(), error) {
			s, c, err := startEtcd()
			if err != nil {
				return nil, nil, nil, err
			}
			l, err := etcdlock.New(c)
			if err != nil {
				return nil, nil, nil, err
			}
			rw, err := etcdlock.NewRW(c)
			if err != nil {
				return nil, nil, nil, err
			}
			return l, rw, func() { l.Close(); rw.Close(); c.Close(); s.stop() }, nil
		}})
	}
	fmt.Printf("\nRead-write locks (rwlock) next to each backend's lock, same server, same run; pairs/s of the lock, then ratios:\n")
	fmt.Printf("\n| | %s |\n|---|", "lock | read | write")
	fmt.Print("---|---|---|\n")
	type row struct {
		pairs    []float64 // per goroutine count
		p99      time.Duration
		perSec   float64
		violates int64
	}
	for _, b := range backends {
		if only != "" && !slices.Contains(strings.Split(only, ","), b.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "rw: %s ...\n", b.name)
		plain, rw, closeFn, err := b.open()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rw: %s: %v (skipped)\n", b.name, err)
			continue
		}
		sides := []lock.Locker{plain, rw.Readers(), rw.Writers()}
		rows := make([]row, len(sides))
		for i, side := range sides {
			l := managerLike(side)
			for _, g := range goroutineCounts {
				rows[i].pairs = append(rows[i].pairs, median(runs, func(run int) float64 {
					return uncontended(ctx, l, fmt.Sprintf("%srw:%s:%d:u%d:%d:", prefix, b.name, i, g, run), g, dur)
				}))
			}
			var cs []contendedResult
			for run := range runs {
				cs = append(cs, contended(ctx, l, fmt.Sprintf("%srw:%s:%d:c%d", prefix, b.name, i, run), 16, dur))
			}
			c := medianContended(cs)
			rows[i].p99, rows[i].perSec, rows[i].violates = c.p99, c.perSec, c.violations
		}
		closeFn()
		for gi, g := range goroutineCounts {
			fmt.Printf("| %s, %d goroutine%s (pairs/s) | %s | %.2fx | %.2fx |\n", b.name, g, map[bool]string{true: "s"}[g > 1],
				si(rows[0].pairs[gi]), rows[1].pairs[gi]/rows[0].pairs[gi], rows[2].pairs[gi]/rows[0].pairs[gi])
		}
		fmt.Printf("| %s, contended 16 on 1 key: p99 wait | %s | %s | %s |\n", b.name, ms(rows[0].p99), ms(rows[1].p99), ms(rows[2].p99))
		fmt.Printf("| %s, contended: acquisitions/s | %s | %.2fx | %.2fx |\n", b.name, si(rows[0].perSec), rows[1].perSec/rows[0].perSec, rows[2].perSec/rows[0].perSec)
		fmt.Printf("| %s, contended: holders found together | %d | (shared) | %d |\n", b.name, rows[0].violates, rows[2].violates)
	}
}

// forgetCounters deletes the fencing counters the run left under the
// names starting with prefix, which would otherwise stay for the token
// retention (24 h) and slow every SCAN of a shared server.
func forgetCounters(ctx context.Context, c *redis.Client, prefix string) {
	iter := c.Scan(ctx, 0, redislock.DefaultPrefix+"{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

// managerLike is a lock.Locker as the benchmark's locker, with the TTL
// every implementation asks for.
func managerLike(l lock.Locker) locker {
	return locker{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, lock.WithTTL(ttl))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		},
		close:  func() {},
		stalls: new(atomic.Int64),
	}
}
