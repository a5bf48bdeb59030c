package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// The SQL lock table (-sqllock) puts lock/sqllock beside what a PostgreSQL
// or MariaDB user writes instead: a session advisory lock or GET_LOCK (no
// lease, no token) and a hand-written lease row (an upsert that takes an
// expired or missing row and returns its token, polled with the Redis
// peers' backoff; DELETE to release). All columns run in one process and
// take turns within every run (forwards, then backwards), so load from
// elsewhere on the machine falls on all of them alike.
var (
	sqlLockTable = flag.Bool("sqllock", false, "measure lock/sqllock against PostgreSQL advisory locks, MariaDB GET_LOCK and hand-written lease rows on both")
	sqlLockOnly  = flag.String("sqllock-only", "", "comma-separated columns of the -sqllock table (default all)")
)

// A sqlLockImpl is one column of the SQL lock table. open returns a way to
// make lockers: every locker of one column shares its pool, and a column
// whose lockers are Lockers (latchkey's) makes a new one per call.
type sqlLockImpl struct {
	name   string
	server string // "postgres" or "mariadb": whose processes' CPU is counted
	open   func(ctx context.Context, c *sqlcount.Counter, prefix string) (newLocker func() locker, done func(), err error)
}

func sqlLockImpls() []sqlLockImpl {
	sep := "?"
	if strings.Contains(*sqlMySQL, "?") {
		sep = "&"
	}
	mysqlDSN := *sqlMySQL + sep + "interpolateParams=true"
	return []sqlLockImpl{
		{"pg advisory lock", "postgres", openPGAdvisory},
		{"pg lease row", "postgres", openPGLeaseRow},
		{"sqllock pgx", "postgres", func(ctx context.Context, c *sqlcount.Counter, prefix string) (func() locker, func(), error) {
			pool, err := benchPool(ctx, c)
			if err != nil {
				return nil, nil, err
			}
			return latchkeyLockers(func() (*sqllock.Locker, error) {
				return sqllock.NewPgx(ctx, pool, sqllock.WithTable(prefix+"locks"))
			}, func() {
				_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+prefix+"locks, "+prefix+"locks_queue")
				pool.Close()
			})
		}},
		{"sqllock database/sql (pg)", "postgres", func(ctx context.Context, c *sqlcount.Counter, prefix string) (func() locker, func(), error) {
			db, err := benchDB("pgx", *sqlPG, c)
			if err != nil {
				return nil, nil, err
			}
			return latchkeyLockers(func() (*sqllock.Locker, error) {
				return sqllock.New(ctx, db, sqllock.Postgres, sqllock.WithTable(prefix+"locks"))
			}, func() {
				_, _ = db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+prefix+"locks, "+prefix+"locks_queue")
				_ = db.Close()
			})
		}},
		{"mariadb GET_LOCK", "mariadb", func(ctx context.Context, c *sqlcount.Counter, _ string) (func() locker, func(), error) {
			return openGetLock(ctx, c, mysqlDSN)
		}},
		{"mariadb lease row", "mariadb", func(ctx context.Context, c *sqlcount.Counter, prefix string) (func() locker, func(), error) {
			return openMySQLLeaseRow(ctx, c, mysqlDSN, prefix)
		}},
		{"sqllock mariadb", "mariadb", func(ctx context.Context, c *sqlcount.Counter, prefix string) (func() locker, func(), error) {
			db, err := benchDB("mysql", mysqlDSN, c)
			if err != nil {
				return nil, nil, err
			}
			// A Locker each stands for a process each: every Locker
			// after the first has a pool of its own, as a process has,
			// whose turns (see lock/sqllock) no other Locker counts.
			pools := []*sql.DB{db}
			opened := 0
			return latchkeyLockers(func() (*sqllock.Locker, error) {
				pool := db
				if opened++; opened > 1 {
					if pool, err = benchDB("mysql", mysqlDSN, c); err != nil {
						return nil, err
					}
					pools = append(pools, pool)
				}
				return sqllock.New(ctx, pool, sqllock.MySQL, sqllock.WithTable(prefix+"locks"))
			}, func() {
				_, _ = db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+prefix+"locks")
				for _, p := range pools {
					_ = p.Close()
				}
			})
		}},
	}
}

func benchPool(ctx context.Context, c *sqlcount.Counter) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(*sqlPG)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = c.Tracer()
	cfg.MaxConns = int32(*sqlConns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

func benchDB(driver, dsn string, c *sqlcount.Counter) (*sql.DB, error) {
	db, err := sqlcount.Open(driver, dsn, c)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(*sqlConns)
	db.SetMaxIdleConns(*sqlConns)
	return db, nil
}

// latchkeyLockers returns a maker of lockers, each on a Locker of its own
// (closed by done), called as users call it: default options.
func latchkeyLockers(open func() (*sqllock.Locker, error), drop func()) (func() locker, func(), error) {
	var (
		mu   sync.Mutex
		all  []*sqllock.Locker
		fail error
	)
	first, err := open() // creates the table
	if err != nil {
		drop()
		return nil, nil, err
	}
	all = append(all, first)
	stalls := new(atomic.Int64)
	wrap := func(l *sqllock.Locker) locker {
		return locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, lock.WithWait(stallAfter))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		}, stalls: stalls}
	}
	made := 0
	newLocker := func() locker {
		mu.Lock()
		defer mu.Unlock()
		made++
		if made == 1 {
			return wrap(first)
		}
		l, err := open()
		if err != nil {
			fail = err
			return wrap(first)
		}
		all = append(all, l)
		return wrap(l)
	}
	done := func() {
		for _, l := range all {
			_ = l.Close()
		}
		if fail != nil {
			fmt.Fprintln(os.Stderr, "sqllock: opening a Locker:", fail)
		}
		drop()
	}
	return newLocker, done, nil
}

// sqlPoll is the peers' wait: the Redis peers' backoff, 1 ms doubling to 32 ms.
func sqlPoll(ctx context.Context, n int) error {
	t := time.NewTimer(backoff(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// openPGAdvisory: pg_advisory_lock on a pooled connection, kept until
// pg_advisory_unlock.
func openPGAdvisory(ctx context.Context, c *sqlcount.Counter, _ string) (func() locker, func(), error) {
	pool, err := benchPool(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	l := locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
			conn.Release()
			return nil, err
		}
		return func(ctx context.Context) error {
			defer conn.Release()
			_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
			return err
		}, nil
	}, stalls: new(atomic.Int64)}
	return func() locker { return l }, pool.Close, nil
}

// openPGLeaseRow: the lease row a PostgreSQL user writes by hand.
func openPGLeaseRow(ctx context.Context, c *sqlcount.Counter, prefix string) (func() locker, func(), error) {
	pool, err := benchPool(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	table := prefix + "lease"
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (key text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL, token bigint NOT NULL)"); err != nil {
		pool.Close()
		return nil, nil, err
	}
	acquire := "INSERT INTO " + table + ` AS l (key, owner, expires_at, token) VALUES ($1, $2, now() + interval '30 seconds', 1)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, token = l.token + 1
WHERE l.expires_at <= now() RETURNING token`
	release := "DELETE FROM " + table + " WHERE key = $1 AND owner = $2"
	l := locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
		owner := token()
		for n := 0; ; n++ {
			var tok int64
			err := pool.QueryRow(ctx, acquire, key, owner).Scan(&tok)
			if err == nil {
				break
			}
			if !errors.Is(err, errNoRows(err)) {
				return nil, err
			}
			if err := sqlPoll(ctx, n); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context) error { _, err := pool.Exec(ctx, release, key, owner); return err }, nil
	}, stalls: new(atomic.Int64)}
	return func() locker { return l }, func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table)
		pool.Close()
	}, nil
}

// errNoRows returns err if it is the driver's "no rows", else a value no
// error matches.
func errNoRows(err error) error {
	if err != nil && strings.Contains(err.Error(), "no rows") {
		return err
	}
	return errors.New("not no rows")
}

// openGetLock: MariaDB's GET_LOCK on a pooled connection, kept until
// RELEASE_LOCK.
func openGetLock(ctx context.Context, c *sqlcount.Counter, dsn string) (func() locker, func(), error) {
	db, err := benchDB("mysql", dsn, c)
	if err != nil {
		return nil, nil, err
	}
	l := locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 10)", key).Scan(&got); err != nil || got.Int64 != 1 {
			_ = conn.Close()
			if err == nil {
				err = errors.New("GET_LOCK timed out")
			}
			return nil, err
		}
		return func(ctx context.Context) error {
			defer conn.Close()
			_, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", key)
			return err
		}, nil
	}, stalls: new(atomic.Int64)}
	return func() locker { return l }, func() { _ = db.Close() }, nil
}

// openMySQLLeaseRow: the lease row a MariaDB user writes by hand; the
// upsert's affected rows say whether it took the row (1 inserted, 2 updated).
func openMySQLLeaseRow(ctx context.Context, c *sqlcount.Counter, dsn, prefix string) (func() locker, func(), error) {
	db, err := benchDB("mysql", dsn, c)
	if err != nil {
		return nil, nil, err
	}
	table := prefix + "lease"
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (k VARBINARY(255) PRIMARY KEY, owner VARBINARY(64) NOT NULL, expires_at DATETIME(6) NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	acquire := "INSERT INTO " + table + " (k, owner, expires_at, token) VALUES (?, ?, NOW(6) + INTERVAL 30 SECOND, 1) ON DUPLICATE KEY UPDATE " +
		"owner = IF(expires_at <= NOW(6), VALUES(owner), owner), token = IF(owner = VALUES(owner), token + 1, token), expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)"
	release := "DELETE FROM " + table + " WHERE k = ? AND owner = ?"
	l := locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
		owner := token()
		for n := 0; ; n++ {
			res, err := db.ExecContext(ctx, acquire, key, owner)
			if err != nil {
				return nil, err
			}
			if k, _ := res.RowsAffected(); k > 0 {
				break
			}
			if err := sqlPoll(ctx, n); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context) error { _, err := db.ExecContext(ctx, release, key, owner); return err }, nil
	}, stalls: new(atomic.Int64)}
	return func() locker { return l }, func() {
		_, _ = db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table)
		_ = db.Close()
	}, nil
}

// contendedEach is contended with goroutine i using lockers[i].
func contendedEach(ctx context.Context, lockers []locker, key string, d time.Duration) contendedResult {
	return contendedOn(ctx, func(i int) locker { return lockers[i] }, key, len(lockers), d, 1)
}

// minOverMax turns contended's fairness, max/min acquisitions per
// goroutine, into min/max, as the SQL table shows it.
func minOverMax(r contendedResult) contendedResult {
	if r.maxMin > 0 {
		r.maxMin = 1 / r.maxMin
	}
	return r
}

// serverCPU returns the CPU time (user + system) of every process named
// like the server, from /proc: other load on the same server counts too.
func serverCPU(server string) time.Duration {
	names := map[string][]string{"postgres": {"postgres"}, "mariadb": {"mariadbd", "mysqld"}}[server]
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || !slices.Contains(names, s[open+1:end]) {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}

// sqlLockRow is one measurement of the table.
type sqlLockRow struct {
	label string
	run   func(ctx context.Context, newLocker func() locker, shared locker, prefix string, d time.Duration) float64
	// fair, if set, is the row's fairness (min/max acquisitions per goroutine) too.
	fair bool
}

func sqlLockBench(ctx context.Context, runs int, d time.Duration, only string) {
	impls := sqlLockImpls()
	if only != "" {
		keep := strings.Split(only, ",")
		impls = slices.DeleteFunc(impls, func(i sqlLockImpl) bool { return !slices.Contains(keep, i.name) })
	}
	stamp := time.Now().UnixNano() % 1e9
	var (
		contSh, contPer = make([][]contendedResult, len(impls)), make([][]contendedResult, len(impls))
		u               = make([][3][]float64, len(impls))
		rtPair, rtAcq   = make([][]float64, len(impls)), make([][]float64, len(impls))
		cpuPair, cpuAcq = make([][]float64, len(impls)), make([][]float64, len(impls))
		stalls          = make([]int64, len(impls))
	)
	gs := []int{1, 16, 64}
	// perPair is what a counter grew by per pair (or acquisition) of a
	// measurement; negative when processes of the server ended meanwhile.
	perPair := func(delta float64, n float64) float64 { return delta / n }
	for run := range runs {
		fmt.Fprintf(os.Stderr, "sqllock table: run %d of %d\n", run+1, runs)
		for _, i := range order(len(impls), run) {
			// One column's connections at a time: the servers' connection
			// limits are shared with whatever else runs on the machine.
			c := new(sqlcount.Counter)
			nl, done, err := impls[i].open(ctx, c, fmt.Sprintf("bl_%d_%d_%d_", stamp, run, i))
			if err != nil {
				fmt.Fprintf(os.Stderr, "sqllock table: %s: %v\n", impls[i].name, err)
				os.Exit(1)
			}
			shared := nl()
			var per []locker
			for range 16 {
				per = append(per, nl())
			}
			for gi, g := range gs {
				before, cpu0 := c.Load(), serverCPU(impls[i].server)
				start := time.Now()
				v := uncontended(ctx, shared, fmt.Sprintf("u%d:%d:", g, run), g, d)
				u[i][gi] = append(u[i][gi], v)
				if n := v * time.Since(start).Seconds(); g == 16 && n > 0 {
					rtPair[i] = append(rtPair[i], perPair(float64(c.Load()-before), n))
					cpuPair[i] = append(cpuPair[i], perPair(float64(serverCPU(impls[i].server)-cpu0)/float64(time.Microsecond), n))
				}
			}
			contSh[i] = append(contSh[i], minOverMax(contended(ctx, shared, fmt.Sprintf("cs:%d", run), 16, d)))
			// Untimed, on another key: a Locker's first wait opens what it
			// waits with (its LISTEN connection on PostgreSQL, its pool's
			// connections), once in a process's life, so that a run of 1 s
			// measures Lockers that have waited before, as a service's are.
			_ = contendedEach(ctx, per, fmt.Sprintf("cw:%d", run), d/4)
			before, cpu0 := c.Load(), serverCPU(impls[i].server)
			start := time.Now()
			r := minOverMax(contendedEach(ctx, per, fmt.Sprintf("cp:%d", run), d))
			if n := r.perSec * time.Since(start).Seconds(); n > 0 {
				rtAcq[i] = append(rtAcq[i], perPair(float64(c.Load()-before), n))
				cpuAcq[i] = append(cpuAcq[i], perPair(float64(serverCPU(impls[i].server)-cpu0)/float64(time.Microsecond), n))
			}
			contPer[i] = append(contPer[i], r)
			stalls[i] += shared.stalls.Load()
			done()
		}
	}
	fmt.Printf("\nSQL locks: medians of %d runs of %v, the columns taking turns within each run; pool of %d connections each:\n\n| |", runs, d, *sqlConns)
	for _, im := range impls {
		fmt.Printf(" %s |", im.name)
	}
	fmt.Print("\n|---|")
	for range impls {
		fmt.Print("---|")
	}
	fmt.Println()
	row := func(label string, f func(i int) string) {
		fmt.Printf("| %s |", label)
		for i := range impls {
			fmt.Printf(" %s |", f(i))
		}
		fmt.Println()
	}
	for gi, g := range gs {
		row(fmt.Sprintf("uncontended, %d goroutines (pairs/s)", g), func(i int) string { return si(medianOf(u[i][gi])) })
	}
	row("round trips per pair (16 goroutines)", func(i int) string { return fmt.Sprintf("%.2f", medianOf(rtPair[i])) })
	row("server CPU µs per pair (16 goroutines)", func(i int) string { return cpuFigure(cpuPair[i]) })
	cont := func(label string, cs [][]contendedResult) {
		row(label+" (acquisitions/s)", func(i int) string { return si(medianContended(cs[i]).perSec) })
		row(label+": fairness (min/max per goroutine)", func(i int) string { return fmt.Sprintf("%.2f", medianContended(cs[i]).maxMin) })
		row(label+": exclusion violations", func(i int) string { return fmt.Sprint(medianContended(cs[i]).violations) })
	}
	cont("contended 16 on 1 key, one Locker", contSh)
	cont("contended 16 on 1 key, a Locker each", contPer)
	row("round trips per acquisition (a Locker each)", func(i int) string { return fmt.Sprintf("%.2f", medianOf(rtAcq[i])) })
	row("server CPU µs per acquisition (a Locker each)", func(i int) string { return cpuFigure(cpuAcq[i]) })
	row(fmt.Sprintf("lock calls stalled > %v (all runs)", stallAfter), func(i int) string { return fmt.Sprint(stalls[i]) })
}

// cpuFigure is the median of a server CPU measurement, or "-" when a
// server process ended during it (the sum over processes then went down).
func cpuFigure(xs []float64) string {
	if len(xs) == 0 || slices.Min(xs) < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", medianOf(xs))
}
