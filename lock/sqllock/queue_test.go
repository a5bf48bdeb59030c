package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// queueFixture is a fresh lock table on PostgreSQL, for Lockers through a
// pgx pool, or through database/sql with pgx's driver when std is set.
type queueFixture struct {
	t     *testing.T
	pool  *pgxpool.Pool
	std   *sql.DB
	table string
	key   string
}

// eachDriver runs f on a fresh fixture for Lockers through a pgx pool and
// for Lockers through database/sql, which LISTEN alike.
func eachDriver(t *testing.T, table string, f func(t *testing.T, f queueFixture)) {
	t.Run("pgx", func(t *testing.T) { f(t, newQueueFixture(t, table)) })
	t.Run("database-sql", func(t *testing.T) {
		fx := newQueueFixture(t, table)
		fx.std = testsvc.OpenDB(t, "pgx", testsvc.PostgresURL(t))
		f(t, fx)
	})
}

func newQueueFixture(t *testing.T, table string) queueFixture {
	t.Helper()
	pool := testsvc.OpenPgx(t, testsvc.PostgresURL(t))
	drop := func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_queue") }
	drop()
	t.Cleanup(drop)
	return queueFixture{t: t, pool: pool, table: table, key: testsvc.KeyPrefix(t) + "k"}
}

// locker opens another Locker on the fixture's table: another process's,
// as far as the server can tell.
func (f queueFixture) locker() *Locker {
	f.t.Helper()
	var (
		l   *Locker
		err error
	)
	if f.std != nil {
		l, err = New(f.t.Context(), f.std, Postgres, WithTable(f.table))
	} else {
		l, err = NewPgx(f.t.Context(), f.pool, WithTable(f.table))
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = l.Close() })
	return l
}

// queued returns the Lockers in the key's queue, longest first.
func (f queueFixture) queued() []string {
	f.t.Helper()
	rows, err := f.pool.Query(f.t.Context(), "SELECT locker FROM "+f.table+"_queue WHERE key = $1 ORDER BY queued_us, locker", f.key)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// waitQueued waits until the key's queue holds n Lockers.
func (f queueFixture) waitQueued(n int) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(f.queued()) != n {
		if time.Now().After(deadline) {
			f.t.Fatalf("the queue holds %v, not %d Lockers", f.queued(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitBehind starts an Acquire of the key by l that waits up to a minute
// (lease options opts) and releases the lock it gets; the channel receives
// its error.
func (f queueFixture) waitBehind(l *Locker, opts ...lock.Option) <-chan error {
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(f.t.Context(), f.key, append(opts, lock.WithWait(time.Minute))...)
		if err == nil {
			err = lease.Release(context.Background())
		}
		got <- err
	}()
	return got
}

// TestLockersTakeTurnsInArrivalOrder checks that Lockers of different
// processes waiting for one lock get it in the order they began to wait:
// each release wakes the Locker that has waited longest, not every Locker
// to race for it (where four orders in 24 came out right by chance).
// Through database/sql with pgx's driver too, whose waiters used to poll.
func TestLockersTakeTurnsInArrivalOrder(t *testing.T) {
	eachDriver(t, "latchkey_queue_order_test", testLockersTakeTurns)
}

func testLockersTakeTurns(t *testing.T, f queueFixture) {
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	first, err := f.locker().Acquire(ctx, f.key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 4
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		errs  = make(chan error, waiters)
	)
	for i := range waiters {
		l := f.locker()
		wg.Go(func() {
			lease, err := l.Acquire(ctx, f.key, ttl, lock.WithWait(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // the next in line attempts meanwhile
			errs <- lease.Release(context.Background())
		})
		f.waitQueued(i + 1)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(order) != "[0 1 2 3]" {
		t.Fatalf("the Lockers took the lock in the order %v, not the order they began to wait", order)
	}
	if q := f.queued(); len(q) != 0 {
		t.Fatalf("after every waiter took the lock the queue still holds %v", q)
	}
}

// TestGivingUpLeavesTheQueue checks that a Locker whose waiter gave up is
// taken out of the queue, so the next release is nobody's promise: a try
// right after it takes the lock.
func TestGivingUpLeavesTheQueue(t *testing.T) {
	eachDriver(t, "latchkey_queue_leave_test", testGivingUpLeavesTheQueue)
}

func testGivingUpLeavesTheQueue(t *testing.T, f queueFixture) {
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	holder, err := f.locker().Acquire(ctx, f.key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := f.locker().Acquire(wctx, f.key, ttl)
		gaveUp <- err
	}()
	f.waitQueued(1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Acquire returned %v", err)
	}
	if q := f.queued(); len(q) != 0 {
		t.Fatalf("a Locker whose waiter gave up is still queued: %v", q)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := f.locker().Acquire(ctx, f.key, ttl, lock.WithWait(0))
	if err != nil {
		t.Fatalf("a try after the release: %v (promised to a Locker that gave up?)", err)
	}
	_ = lease.Release(ctx)
}

// TestPromiseToAVanishedLockerEnds checks that a lock promised to a Locker
// that is gone (its process died while it waited, leaving its queue row)
// passes to the next waiter once the promise ends, and that others' tries
// are refused while it lasts.
func TestPromiseToAVanishedLockerEnds(t *testing.T) {
	f := newQueueFixture(t, "latchkey_queue_vanished_test")
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	holder, err := f.locker().Acquire(ctx, f.key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	const gone = "0123456789abcdef"
	if _, err := f.pool.Exec(ctx, "INSERT INTO "+f.table+"_queue (key, locker, queued_us, expires_at) VALUES ($1, $2, 0, "+
		"FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + 60000)", f.key, gone); err != nil {
		t.Fatal(err)
	}
	got := f.waitBehind(f.locker(), ttl)
	f.waitQueued(2)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var promised string
	if err := f.pool.QueryRow(ctx, "SELECT COALESCE(next_locker, '') FROM "+f.table+" WHERE key = $1", f.key).Scan(&promised); err != nil {
		t.Fatal(err)
	}
	if promised != gone {
		t.Fatalf("the release promised the lock to %q, not to the Locker queued longest (%q)", promised, gone)
	}
	_, err = f.locker().Acquire(ctx, f.key, ttl, lock.WithWait(0))
	// The promise lasts a second: a try that a loaded machine delayed past
	// it may rightly succeed.
	if within := time.Since(released) < 500*time.Millisecond; within && !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a try while the lock is promised to another Locker: %v, want ErrNotAcquired", err)
	} else if err == nil {
		t.Log("the try came after the promise ended; not checked")
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter behind a vanished Locker: %v", err)
	}
}

// TestNotificationWakesThePromisedLocker checks whom the listener wakes for
// a release: its observers always; its waiting Acquire calls when the
// release promised the lock to their Locker or to nobody, not when it
// promised it to another Locker.
func TestNotificationWakesThePromisedLocker(t *testing.T) {
	ln := &listener{locker: lockerA}
	const hash = "0123"
	for _, c := range []struct {
		payload        string
		waiter, others bool
	}{
		{hash, true, true},
		{hash + " " + lockerA, true, true},
		{hash + " " + lockerB, false, true},
		{"4567", false, false},
	} {
		waiter, stopWaiter := ln.waiters.Watch(hash)
		observer, stopObserver := ln.observers.Watch(hash)
		ln.notify(c.payload)
		if woke := signalled(waiter); woke != c.waiter {
			t.Errorf("notification %q: the waiter woke: %v, want %v", c.payload, woke, c.waiter)
		}
		if woke := signalled(observer); woke != c.others {
			t.Errorf("notification %q: the observer woke: %v, want %v", c.payload, woke, c.others)
		}
		stopWaiter()
		stopObserver()
	}
}

func signalled(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestListeningTakesNoConnectionOfThePool checks that a Locker through
// database/sql with pgx's driver LISTENs on a connection of its own: with a
// pool of one connection, a waiter of one Locker listens while another
// Locker's holder releases through that one connection, and the waiter
// gets the lock. A listener holding the pool's connection would leave the
// release waiting for it forever.
func TestListeningTakesNoConnectionOfThePool(t *testing.T) {
	f := newQueueFixture(t, "latchkey_queue_std_test")
	f.std = testsvc.OpenDB(t, "pgx", testsvc.PostgresURL(t), testsvc.MaxOpenConns(1))
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	holder, waiter := f.locker(), f.locker()
	if waiter.listener == nil {
		t.Fatal("a Locker through pgx's database/sql driver does not listen")
	}
	lease, err := holder.Acquire(ctx, f.key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	got := f.waitBehind(waiter, ttl)
	f.waitQueued(1)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		t.Fatalf("the release while another Locker listens: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

// TestListenerLetsItsConnectionGo checks that a Locker holds its LISTEN
// connection only while someone waits and for listenIdle after: one that
// waited once and was never closed does not keep a connection of the
// server for the rest of its process. The next wait listens again.
func TestListenerLetsItsConnectionGo(t *testing.T) {
	defer func(d time.Duration) { listenIdle = d }(listenIdle)
	listenIdle = 100 * time.Millisecond
	f := newQueueFixture(t, "latchkey_queue_idle_test")
	listening := func() int {
		var n int
		if err := f.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
			"LISTEN "+pgx.Identifier{f.table + channelSuffix}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitListening := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for listening() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections listen, want %d", listening(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	holder, waiter := f.locker(), f.locker()
	for range 2 {
		lease, err := holder.Acquire(ctx, f.key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		got := f.waitBehind(waiter, ttl)
		f.waitQueued(1)
		waitListening(1)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		waitListening(0)
	}
}

// countedDB counts the statements a backend sends.
type countedDB struct {
	sqlconn.DB
	n atomic.Int64
}

func (c *countedDB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, q, args...)
}

func (c *countedDB) QueryRow(ctx context.Context, q string, args ...any) sqlconn.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, q, args...)
}

// TestReleasePromisedElsewhereSparesTheNextAttempt: a service releases a
// lock another process waits for, and the release promises the lock to that
// process for a second. Any attempt of the releasing service within the
// promise is refused, so its next Acquire of the key sends none: a try
// fails at once, reporting the promise's time left, and a waiting Acquire
// goes straight to the attempt that joins the queue. The process promised
// the lock gets it, and the releasing service's waiting Acquire gets it
// after that.
func TestReleasePromisedElsewhereSparesTheNextAttempt(t *testing.T) {
	eachDriver(t, "latchkey_promise_spare_test", func(t *testing.T, f queueFixture) {
		ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
		releaser := f.locker()
		counted := &countedDB{DB: releaser.backend.db}
		releaser.backend.db = counted
		lease, err := releaser.Acquire(ctx, f.key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		other := f.waitBehind(f.locker(), ttl)
		f.waitQueued(1)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		before := counted.n.Load()
		_, err = releaser.Acquire(ctx, f.key, ttl, lock.WithWait(0))
		var held *lock.HeldError
		if !errors.As(err, &held) || held.TimeLeft <= 0 || held.TimeLeft > promisedFor {
			t.Fatalf("a try within the promise to another Locker: %v; want the lock held for the promise's time left", err)
		}
		if n := counted.n.Load() - before; n != 0 {
			t.Fatalf("a try within the promise to another Locker sent %d statements, not 0", n)
		}
		if err := <-other; err != nil {
			t.Fatalf("the Locker promised the lock did not get it: %v", err)
		}
		again, err := releaser.Acquire(ctx, f.key, ttl, lock.WithWait(10*time.Second))
		if err != nil {
			t.Fatalf("the releasing service did not get the lock back: %v", err)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
