package sqllock_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// openSQLite opens path as lock/lockurl does: parallel subtests that open
// one new file race to put it in WAL mode, and the loser's first connection
// fails at once (backendurl.SQLiteReady).
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db := testsvc.OpenDB(t, "sqlite", sqliteDSN(path), testsvc.MaxOpenConns(0))
	if err := backendurl.SQLiteReady(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestSQLiteConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	admin := openSQLite(t, path)
	var (
		mu  sync.Mutex
		dbs []*sql.DB
	)
	var cuts locktest.Cuts
	locktest.Run(t, locktest.Harness{
		// SQLite serialises writers on one file: under -race, beside the
		// rest of the suite, a renewal can queue for a few hundred ms
		// behind other writers, which a 300 ms lease cannot absorb.
		TTL: time.Second,
		// Each Locker gets its own *sql.DB, as a separate process would.
		New: func(t *testing.T) lock.Locker {
			db := openSQLite(t, path)
			mu.Lock()
			dbs = append(dbs, db)
			mu.Unlock()
			l, err := sqllock.New(t.Context(), db, sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return cuts.Add(l, func() { _ = db.Close() })
		},
		Cut: cuts.Cut,
		Holder: func(t *testing.T, key string) string {
			var owner string
			if err := admin.QueryRow(`SELECT owner FROM latchkey_locks WHERE key = ?`, key).Scan(&owner); err != nil {
				t.Fatal(err)
			}
			return parseOwner(t, owner)
		},
		// Deleting the row also checks that tokens keep rising without it.
		Revoke: func(t *testing.T, key string) {
			if _, err := admin.Exec(`DELETE FROM latchkey_locks WHERE key = ?`, key); err != nil {
				t.Fatal(err)
			}
		},
		// SQLite has no server: a restart is every process closing the file.
		Restart: func(t *testing.T) {
			mu.Lock()
			defer mu.Unlock()
			for _, db := range dbs {
				_ = db.Close()
			}
			dbs = nil
		},
	})
}

// TestPostgresConformance runs the suite through pgx (LISTEN/NOTIFY) and
// through database/sql (polling) on a private server it restarts.
func TestPostgresConformance(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	admin := testsvc.OpenPgx(t, pg.URL())
	revoke := func(t *testing.T, key string) {
		if _, err := admin.Exec(t.Context(), `DELETE FROM latchkey_locks WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
	}
	restart := func(t *testing.T) { pg.Restart() }
	holder := func(t *testing.T, key string) string {
		var owner string
		if err := admin.QueryRow(t.Context(), `SELECT owner FROM latchkey_locks WHERE key = $1`, key).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		return parseOwner(t, owner)
	}
	t.Run("pgx", func(t *testing.T) {
		var cuts locktest.Cuts
		locktest.Run(t, locktest.Harness{
			New: func(t *testing.T) lock.Locker {
				pool := testsvc.OpenPgx(t, pg.URL())
				l, err := sqllock.NewPgx(t.Context(), pool)
				if err != nil {
					t.Fatal(err)
				}
				return cuts.Add(l, pool.Close)
			},
			Cut:     cuts.Cut,
			Holder:  holder,
			Revoke:  revoke,
			Restart: restart,
		})
	})
	t.Run("database-sql", func(t *testing.T) {
		var cuts locktest.Cuts
		locktest.Run(t, locktest.Harness{
			New: func(t *testing.T) lock.Locker {
				db := testsvc.OpenDB(t, "pgx", pg.URL())
				l, err := sqllock.New(t.Context(), db, sqllock.Postgres)
				if err != nil {
					t.Fatal(err)
				}
				return cuts.Add(l, func() { _ = db.Close() })
			},
			Cut:     cuts.Cut,
			Holder:  holder,
			Revoke:  revoke,
			Restart: restart,
		})
	})
}

// parseOwner returns the holder label in a lock row's owner.
func parseOwner(t *testing.T, owner string) string {
	t.Helper()
	_, label, ok := lock.ParseOwner(owner)
	if !ok {
		t.Fatalf("owner %q is not an owner", owner)
	}
	return label
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	if _, err := sqllock.New(ctx, nil, sqllock.SQLite); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("New(nil db) = %v, want ErrInvalid", err)
	}
	if _, err := sqllock.NewPgx(ctx, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewPgx(nil) = %v, want ErrInvalid", err)
	}
	db := openSQLite(t, filepath.Join(t.TempDir(), "x.db"))
	for _, table := range []string{"", "locks; DROP TABLE x", "1abc", `"quoted"`, strings.Repeat("a", 64)} {
		if _, err := sqllock.New(ctx, db, sqllock.SQLite, sqllock.WithTable(table)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("WithTable(%q) = %v, want ErrInvalid", table, err)
		}
	}
	// Detect tells SQLite from the driver; the lock works as with SQLite.
	detected, err := sqllock.New(ctx, db, sqllock.Detect, sqllock.WithTable("detected_locks"))
	if err != nil {
		t.Fatalf("New(Detect) on SQLite: %v", err)
	}
	if lease, err := detected.Acquire(ctx, "k"); err != nil {
		t.Fatalf("Acquire on a detected dialect: %v", err)
	} else {
		_ = lease.Release(ctx)
	}
	if _, err := db.Exec(`DROP TABLE detected_locks`); err != nil {
		t.Fatal(err)
	}
	if _, err := sqllock.New(ctx, db, sqllock.Dialect(99)); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("unknown dialect = %v, want ErrInvalid", err)
	}
	// None of that created a table. (The valid New made the default tables
	// of every mode, which the modes of one name share.)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE tbl_name NOT LIKE 'latchkey\_%' ESCAPE '\'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad input created %d tables (err %v)", n, err)
	}
	l, err := sqllock.New(ctx, db, sqllock.SQLite, sqllock.WithTable("custom_locks"))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM custom_locks`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("custom table has %d rows (err %v)", n, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBatchRenewal holds many leases and checks they all survive several
// renewal rounds, which run through one statement per tick. The leases are
// 3 s, held for more than two TTLs: a tick then has 2 s to be answered on a
// loaded machine (with 1 s leases, a tick that took over 2/3 s lost one).
func TestBatchRenewal(t *testing.T) {
	t.Parallel()
	db := openSQLite(t, filepath.Join(t.TempDir(), "batch.db"))
	db.SetMaxOpenConns(1)
	l, err := sqllock.New(t.Context(), db, sqllock.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	leases := make([]*lock.Lease, n)
	for i := range leases {
		if leases[i], err = l.Acquire(t.Context(), fmt.Sprintf("batch:%d", i), lock.WithTTL(3*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(7 * time.Second)
	for i, lease := range leases {
		if err := lease.Err(); err != nil {
			t.Fatalf("lease %d lost during batch renewal: %v", i, err)
		}
		if err := lease.Release(t.Context()); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// Child-process holders, for the crash tests. The test binary re-executes
// itself with these variables set and holds a lock until it is killed.
const (
	childEnv  = "LATCHKEY_SQLLOCK_CHILD" // "sqlite" or "postgres"
	childDSN  = "LATCHKEY_SQLLOCK_DSN"
	childKey  = "LATCHKEY_SQLLOCK_KEY"
	childTTLs = "LATCHKEY_SQLLOCK_TTL"
)

func TestMain(m *testing.M) {
	rwlocktest.Child(rwTarget)
	if kind := os.Getenv(childEnv); kind != "" {
		os.Exit(runChild(kind))
	}
	os.Exit(m.Run())
}

func runChild(kind string) int {
	ctx := context.Background()
	ttl, _ := time.ParseDuration(os.Getenv(childTTLs))
	var (
		l   *sqllock.Locker
		err error
	)
	switch kind {
	case "sqlite":
		db, oerr := sql.Open("sqlite", sqliteDSN(os.Getenv(childDSN)))
		if oerr != nil {
			fmt.Fprintln(os.Stderr, oerr)
			return 2
		}
		l, err = sqllock.New(ctx, db, sqllock.SQLite)
	default:
		pool, perr := pgxpool.New(ctx, os.Getenv(childDSN))
		if perr != nil {
			fmt.Fprintln(os.Stderr, perr)
			return 2
		}
		l, err = sqllock.NewPgx(ctx, pool)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lease, err := l.Acquire(ctx, os.Getenv(childKey), lock.WithTTL(ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("token %d\n", lease.Token())
	select {} // hold, renewing, until killed
}

// startHolder starts a child process that takes key and returns its token.
func startHolder(t *testing.T, kind, dsn, key string, ttl time.Duration) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+kind, childDSN+"="+dsn, childKey+"="+key, childTTLs+"="+ttl.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder process: %v", err)
	}
	token, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "token ")), 10, 64)
	if err != nil {
		t.Fatalf("holder process said %q", line)
	}
	return cmd, token
}

// TestKilledHolderIsSucceededAfterTTL kills a holder process with SIGKILL:
// nobody gets the lock before its lease runs out, somebody does after, and
// with a higher token.
func TestKilledHolderIsSucceededAfterTTL(t *testing.T) {
	const ttl = 2 * time.Second
	run := func(t *testing.T, kind, dsn string, l lock.Locker) {
		key := testsvc.KeyPrefix(t) + "job"
		cmd, token := startHolder(t, kind, dsn, key, ttl)
		// The child renews: after more than a TTL it still holds.
		time.Sleep(ttl + ttl/2)
		if _, err := l.Acquire(t.Context(), key, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("lock free while its holder lives and renews: %v", err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		killed := time.Now()
		if _, err := l.Acquire(t.Context(), key, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("lock free right after its holder died, before its TTL: %v", err)
		}
		lease, err := l.Acquire(t.Context(), key, lock.WithWait(3*ttl))
		if err != nil {
			t.Fatalf("lock of a killed holder never became free: %v", err)
		}
		t.Logf("succeeded %v after the kill (TTL %v)", time.Since(killed).Round(time.Millisecond), ttl)
		if lease.Token() <= token {
			t.Fatalf("successor token %d <= dead holder's %d", lease.Token(), token)
		}
		if err := lease.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "locks.db")
		l, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite)
		if err != nil {
			t.Fatal(err)
		}
		run(t, "sqlite", path, l)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := testsvc.PostgresURL(t)
		l, err := sqllock.NewPgx(t.Context(), testsvc.OpenPgx(t, url))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		run(t, "postgres", url, l)
	})
}

// TestPostgresConnectionFaults cuts or blackholes the holder's connection
// mid-lease: Done must close before anyone else can take the lock, and the
// lock must then become free to others (no ghost lease).
func TestPostgresConnectionFaults(t *testing.T) {
	url := testsvc.PostgresURL(t)
	for _, fault := range []struct {
		name   string
		inject func(*testsvc.Proxy)
	}{
		{"cut", (*testsvc.Proxy).Cut},
		{"blackhole", func(p *testsvc.Proxy) { p.Blackhole(true) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			t.Parallel()
			holder, proxy := proxiedPgxLocker(t, url)
			other, err := sqllock.NewPgx(t.Context(), testsvc.OpenPgx(t, url))
			if err != nil {
				t.Fatal(err)
			}
			const ttl = time.Second
			key := testsvc.KeyPrefix(t) + "k"
			lease, err := holder.Acquire(t.Context(), key, lock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			fault.inject(proxy)
			// The other client waits; it must not get in before Done fired.
			got, err := other.Acquire(t.Context(), key, lock.WithWait(5*ttl))
			if err != nil {
				t.Fatalf("lock never freed after the holder's connection failed: %v", err)
			}
			checkLostFirst(t, lease, got)
			if err := got.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Drop the stalled connections, or pgx spends 15 s draining them
			// when the pool closes.
			proxy.Cut()
			_ = holder.Close()
		})
	}
}

// proxiedPgxLocker returns a Locker whose connections to the PostgreSQL
// server at url pass through the returned proxy, and time out connecting
// after 500 ms.
func proxiedPgxLocker(t *testing.T, url string) (*sqllock.Locker, *testsvc.Proxy) {
	t.Helper()
	proxy := testsvc.NewProxy(t, hostPort(t, url))
	cfg, err := pgxpool.ParseConfig(strings.Replace(url, hostPort(t, url), proxy.Addr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 500 * time.Millisecond
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	holder, err := sqllock.NewPgx(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return holder, proxy
}

// checkLostFirst checks that lost's holder had learnt of its loss
// (ErrLeaseLost) by the time successor got the lock, with a higher token.
func checkLostFirst(t *testing.T, lost, successor *lock.Lease) {
	t.Helper()
	select {
	case <-lost.Done():
	default:
		t.Fatal("another client acquired while the holder still believed it held the lock")
	}
	if !errors.Is(lost.Err(), lock.ErrLeaseLost) {
		t.Fatalf("holder's Err = %v, want ErrLeaseLost", lost.Err())
	}
	if successor.Token() <= lost.Token() {
		t.Fatalf("successor token %d <= lost holder's %d", successor.Token(), lost.Token())
	}
}

func hostPort(t *testing.T, url string) string {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
}

// TestTableNameLeavesRoomForTheChannel: on PostgreSQL a release notifies
// waiters on the channel <table>_released, itself an identifier of at most
// 63 bytes. A table name that fits but leaves no room for the suffix must be
// refused up front, not accepted and then fail every release.
func TestTableNameLeavesRoomForTheChannel(t *testing.T) {
	ctx := t.Context()
	db := testsvc.OpenDB(t, "pgx", testsvc.PostgresURL(t))
	long := "locks_" + strings.Repeat("x", 57) // 63 bytes: a valid table name
	t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + long) })
	l, err := sqllock.New(ctx, db, sqllock.Postgres, sqllock.WithTable(long))
	if err == nil {
		lease, aerr := l.Acquire(ctx, "k")
		if aerr != nil {
			t.Fatalf("Acquire on a %d-byte table: %v", len(long), aerr)
		}
		t.Fatalf("New accepted a %d-byte table, whose release channel has %d bytes; Release = %v",
			len(long), len(long+"_released"), lease.Release(ctx))
	}
	if !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("New(%d-byte table) = %v, want ErrInvalid", len(long), err)
	}
	short := long[:63-len("_released")]
	t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + short) })
	l, err = sqllock.New(ctx, db, sqllock.Postgres, sqllock.WithTable(short))
	if err != nil {
		t.Fatalf("New(%d-byte table): %v", len(short), err)
	}
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release on a %d-byte table: %v", len(short), err)
	}
}

// TestConcurrentFirstOpen: Lockers of several processes starting at once on
// a database without the table each run CREATE TABLE IF NOT EXISTS, which
// on PostgreSQL fails for all but one with a unique violation in the
// catalog (pg_type_typname_nsp_index, SQLSTATE 23505) when they collide:
// an election's candidates starting together failed so. Eight pools at
// once, each on a new table, five times: every Locker opens.
func TestConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	url := testsvc.PostgresURL(t)
	admin := testsvc.OpenPgx(t, url)
	for round := range 5 {
		table := fmt.Sprintf("latchkey_first_open_%d_%d", os.Getpid(), round)
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_queue")
		})
		pools := make([]*pgxpool.Pool, 8)
		for i := range pools {
			pools[i] = testsvc.OpenPgx(t, url)
			if err := pools[i].Ping(t.Context()); err != nil { // connected before the race
				t.Fatal(err)
			}
		}
		errs := make(chan error, len(pools))
		for _, pool := range pools {
			go func() {
				_, err := sqllock.NewPgx(t.Context(), pool, sqllock.WithTable(table))
				errs <- err
			}()
		}
		for range pools {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: NewPgx: %v", round, err)
			}
		}
	}
}
