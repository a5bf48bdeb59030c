package sqllock

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// eachDialect runs f on a Locker on table (created fresh) of every dialect:
// SQLite, PostgreSQL through pgx and through database/sql, MariaDB.
// db runs a statement on the Locker's database; open opens another Locker
// on the table.
func eachDialect(t *testing.T, table string, f func(t *testing.T, l *Locker, db func(q string, args ...any) error, open func() (*Locker, error))) {
	std := func(t *testing.T, driver, dsn string, d Dialect) {
		db := testsvc.OpenDB(t, driver, dsn, testsvc.MaxOpenConns(0))
		exec := func(q string, args ...any) error {
			_, err := db.ExecContext(context.Background(), q, args...)
			return err
		}
		_ = exec("DROP TABLE IF EXISTS " + table)
		t.Cleanup(func() { _ = exec("DROP TABLE IF EXISTS " + table) })
		open := func() (*Locker, error) {
			l, err := New(t.Context(), db, d, WithTable(table))
			if err == nil {
				t.Cleanup(func() { _ = l.Close() }) // its LISTEN connection, on PostgreSQL
			}
			return l, err
		}
		l, err := open()
		if err != nil {
			t.Fatal(err)
		}
		f(t, l, exec, open)
	}
	t.Run("sqlite", func(t *testing.T) {
		std(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "h.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)", SQLite)
	})
	t.Run("postgres-pgx", func(t *testing.T) {
		pool := testsvc.OpenPgx(t, testsvc.PostgresURL(t))
		exec := func(q string, args ...any) error { _, err := pool.Exec(context.Background(), q, args...); return err }
		_ = exec("DROP TABLE IF EXISTS " + table + ", " + table + "_queue")
		defer func() { _ = exec("DROP TABLE IF EXISTS " + table + ", " + table + "_queue") }()
		open := func() (*Locker, error) {
			l, err := NewPgx(t.Context(), pool, WithTable(table))
			if err == nil {
				t.Cleanup(func() { _ = l.Close() })
			}
			return l, err
		}
		l, err := open()
		if err != nil {
			t.Fatal(err)
		}
		f(t, l, exec, open)
	})
	t.Run("postgres-database-sql", func(t *testing.T) {
		std(t, "pgx", testsvc.PostgresURL(t), Postgres)
	})
	t.Run("mysql", func(t *testing.T) {
		std(t, "mysql", testsvc.MySQL(t), MySQL)
	})
}

// Owners as lock.Manager makes them: the first 16 characters are the
// Locker's.
const (
	lockerA = "aaaaaaaaaaaaaaaa"
	lockerB = "bbbbbbbbbbbbbbbb"
)

// TestReleaseHandover checks the release that hands the lock to the
// releasing Locker's next waiter: a new, higher token for it, the lock
// its own; and that once a waiter of another Locker has marked the row, the
// release frees the lock instead, for that waiter to take with a higher
// token still.
func TestReleaseHandover(t *testing.T) {
	eachDialect(t, "latchkey_handover_test", func(t *testing.T, l *Locker, _ func(string, ...any) error, _ func() (*Locker, error)) {
		ctx, b, key, ttl := t.Context(), l.backend, testsvc.KeyPrefix(t)+"k", 10*time.Second
		t1, _, err := b.TryAcquire(ctx, key, lockerA+"1", ttl)
		if err != nil {
			t.Fatal(err)
		}
		// A waiter of the same Locker does not mark the row.
		if _, _, err := b.TryAcquire(ctx, key, lockerA+"2", ttl); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
		}
		if _, err := b.ReleaseHandover(ctx, key, lockerA+"x", lockerA+"2", ttl); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("ReleaseHandover by a non-holder = %v, want ErrNotHeld", err)
		}
		t2, err := b.ReleaseHandover(ctx, key, lockerA+"1", lockerA+"2", ttl)
		if err != nil || t2 <= t1 {
			t.Fatalf("ReleaseHandover = %d, %v; want a token above %d", t2, err, t1)
		}
		// The waiter's own attempt, on its way as the release handed it the
		// lock, must not take it again: the Manager holds the lease handed
		// over, and would release the lock for the waiters behind if the
		// waiter had left meanwhile, under a lease the attempt returned.
		if _, _, err := b.TryAcquire(ctx, key, lockerA+"2", ttl); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("the new holder's attempt = %v, want ErrNotAcquired", err)
		}
		if err := b.Release(ctx, key, lockerA+"1"); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Release by the old holder = %v, want ErrNotHeld", err)
		}
		if err := b.Renew(ctx, key, lockerA+"2", ttl); err != nil {
			t.Fatalf("the lock handed over is not the waiter's: %v", err)
		}
		// Another Locker's waiter marks the row: the next release frees it.
		if _, _, err := b.TryAcquire(ctx, key, lockerB+"1", ttl); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
		}
		t3, err := b.ReleaseHandover(ctx, key, lockerA+"2", lockerA+"3", ttl)
		if err != nil || t3 != 0 {
			t.Fatalf("ReleaseHandover with another Locker waiting = %d, %v; want 0, nil", t3, err)
		}
		t4, _, err := b.TryAcquire(ctx, key, lockerB+"1", ttl)
		if err != nil || t4 <= t2 {
			t.Fatalf("TryAcquire after the release = %d, %v; want a token above %d", t4, err, t2)
		}
		if err := b.Release(ctx, key, lockerB+"1"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHandoverThroughLocker checks, through the Locker's own API, that a
// waiter of the same Locker gets the lock at the holder's release with a
// higher token.
func TestHandoverThroughLocker(t *testing.T) {
	eachDialect(t, "latchkey_handover_test", func(t *testing.T, l *Locker, _ func(string, ...any) error, _ func() (*Locker, error)) {
		ctx, key := t.Context(), testsvc.KeyPrefix(t)+"k"
		first, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *lock.Lease, 1)
		errs := make(chan error, 1)
		go func() {
			second, err := l.Acquire(ctx, key, lock.WithWait(30*time.Second))
			errs <- err
			got <- second
		}()
		for l.Waiting(key) == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second.Token() <= first.Token() {
			t.Fatalf("token handed over %d, not above %d", second.Token(), first.Token())
		}
		if err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReleaseNotifiesOnlyWhenWaited checks that a PostgreSQL release
// notifies only when a waiter of another Locker marked the lock: NOTIFY
// locks out every other committing NOTIFY until it commits. A notification
// sent after the release arrives after the release's, if it sent one.
func TestReleaseNotifiesOnlyWhenWaited(t *testing.T) {
	ctx := t.Context()
	pool := testsvc.OpenPgx(t, testsvc.PostgresURL(t))
	const table = "latchkey_notify_test"
	_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+table+", "+table+"_queue")
	defer func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_queue") }()
	l, err := NewPgx(ctx, pool, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listen := conn.Hijack()
	defer listen.Close(context.Background())
	if _, err := listen.Exec(ctx, "LISTEN "+table+channelSuffix); err != nil {
		t.Fatal(err)
	}
	p := notifyProbe{t: t, pool: pool, listen: listen, channel: table + channelSuffix}
	key := testsvc.KeyPrefix(t) + "k"
	checkNotifies(t, l.backend, key, p, false)
	checkNotifies(t, l.backend, key+"'", p, true) // a fresh, unmarked row
}

// checkNotifies releases key (by Release, or by ReleaseHandover) once
// unmarked and once marked by another Locker's waiter, and checks that only
// the second notifies.
func checkNotifies(t *testing.T, b *backend, key string, p notifyProbe, handover bool) {
	ctx, ttl := t.Context(), 10*time.Second
	release := func(owner string) func() error {
		if handover {
			return func() error { _, err := b.ReleaseHandover(ctx, key, owner, lockerA+"next", ttl); return err }
		}
		return func() error { return b.Release(ctx, key, owner) }
	}
	if _, _, err := b.TryAcquire(ctx, key, lockerA+"1", ttl); err != nil {
		t.Fatal(err)
	}
	if got := p.firstAfter(release(lockerA + "1")); got != "sentinel" {
		t.Fatalf("handover %v: a release nobody waited for notified %q", handover, got)
	}
	if handover { // the waiter took it
		if err := b.Release(ctx, key, lockerA+"next"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := b.TryAcquire(ctx, key, lockerA+"2", ttl); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.TryAcquire(ctx, key, lockerB+"1", ttl); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
	}
	if got := p.firstAfter(release(lockerA + "2")); got != keyHash(key) {
		t.Fatalf("handover %v: a release another Locker's waiter waited for notified %q, want the key's hash", handover, got)
	}
}

// A notifyProbe tells the first notification on channel after a release.
type notifyProbe struct {
	t       *testing.T
	pool    *pgxpool.Pool
	listen  *pgx.Conn
	channel string
}

// firstAfter runs release, then notifies a sentinel, and returns the first
// payload that arrives (the sentinel if release notified nothing).
func (p notifyProbe) firstAfter(release func() error) string {
	p.t.Helper()
	ctx := p.t.Context()
	if err := release(); err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, 'sentinel')", p.channel); err != nil {
		p.t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := p.listen.WaitForNotification(wctx)
	if err != nil {
		p.t.Fatal(err)
	}
	if n.Payload != "sentinel" { // the sentinel follows
		if _, err := p.listen.WaitForNotification(wctx); err != nil {
			p.t.Fatal(err)
		}
	}
	return n.Payload
}

// TestTableBeforeWaited checks that a lock table made before the waited
// column gets it from New, and works.
func TestTableBeforeWaited(t *testing.T) {
	const table = "latchkey_old_table_test"
	eachDialect(t, table, func(t *testing.T, _ *Locker, exec func(string, ...any) error, open func() (*Locker, error)) {
		if err := exec("DROP TABLE " + table); err != nil {
			t.Fatal(err)
		}
		key := "`key`"
		if !strings.HasPrefix(t.Name(), "TestTableBeforeWaited/mysql") {
			key = "key"
		}
		if err := exec("CREATE TABLE " + table + " (" + key + " VARCHAR(200) PRIMARY KEY, owner VARCHAR(200), expires_at BIGINT NOT NULL, token BIGINT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		if err := exec("INSERT INTO " + table + " (" + key + ", owner, expires_at, token) VALUES ('old', NULL, 0, 5)"); err != nil {
			t.Fatal(err)
		}
		l, err := open()
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(t.Context(), "old", lock.WithWait(0))
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token() <= 5 {
			t.Fatalf("token %d, not above the old row's 5", lease.Token())
		}
		if err := lease.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
