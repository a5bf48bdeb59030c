package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlcount"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// turnFixture is one MySQL database with Lockers of their own pools, as
// processes would have, and a session of the test's own.
type turnFixture struct {
	dsn    string
	admin  *sql.DB
	schema string
}

func newTurnFixture(t *testing.T) turnFixture {
	dsn := testsvc.MySQL(t)
	admin := openMySQL(t, dsn)
	var schema string
	if err := admin.QueryRow("SELECT DATABASE()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return turnFixture{dsn: dsn, admin: admin, schema: schema}
}

// locker returns a Locker on a pool of its own, closed when t ends.
func (f turnFixture) locker(t *testing.T) *sqllock.Locker {
	t.Helper()
	l, err := sqllock.New(t.Context(), openMySQL(t, f.dsn), sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// inLine returns how many sessions wait for key's turn, and whether one
// holds it.
func (f turnFixture) inLine(t *testing.T, key string) (waiting int, held bool) {
	t.Helper()
	name := sqllock.TurnName(f.schema, sqllock.DefaultTable, key)
	var holder sql.NullInt64
	if err := f.admin.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if err := f.admin.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
		"%GET_LOCK('"+name+"'%").Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting, holder.Valid
}

// waitInLine waits until n sessions wait for key's turn behind its holder,
// or a few seconds have passed (the waiters then wait in some other way,
// whose order the test checks).
func (f turnFixture) waitInLine(t *testing.T, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if waiting, held := f.inLine(t, key); held && waiting == n {
			return
		}
	}
	t.Logf("%d sessions are not in line for the turn of %q", n, key)
}

// takeInTurn returns a lease of l on key taken under key's turn: another
// Locker holds key, l's Acquire waits in line and holds the turn, and the
// holder releases.
func (f turnFixture) takeInTurn(t *testing.T, l lock.Locker, key string, ttl lock.Option) *lock.Lease {
	t.Helper()
	ctx := t.Context()
	first, err := f.locker(t).Acquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, key, ttl, lock.WithWait(20*time.Second))
		if err != nil {
			errs <- err
			return
		}
		got <- lease
	}()
	f.waitInLine(t, key, 0) // the waiter holds the turn
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return leaseOf(t, got, errs)
}

// leaseOf returns the lease an Acquire sends on got, or fails t with the
// error it sends on errs.
func leaseOf(t *testing.T, got <-chan *lock.Lease, errs <-chan error) *lock.Lease {
	t.Helper()
	select {
	case lease := <-got:
		return lease
	case err := <-errs:
		t.Fatal(err)
		return nil
	}
}

// mustBeFree checks that another service can take key at once.
func (f turnFixture) mustBeFree(t *testing.T, key string) {
	t.Helper()
	next, err := f.locker(t).Acquire(t.Context(), key, lock.WithWait(0))
	if err != nil {
		t.Fatalf("the lock is not free after its release: %v", err)
	}
	_ = next.Release(t.Context())
}

// TestMySQLLockersTakeTurnsInArrivalOrder: five services, each with its own
// Locker, want the lock one holds; the four waiters get it in the order
// they began to wait, not in the order their polls happen to fall, and the
// turns are all given back afterwards.
func TestMySQLLockersTakeTurnsInArrivalOrder(t *testing.T) {
	f := newTurnFixture(t)
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	const key = "order-42"
	first, err := f.locker(t).Acquire(ctx, key, ttl)
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
		l := f.locker(t)
		wg.Go(func() {
			lease, err := l.Acquire(ctx, key, ttl, lock.WithWait(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // the others poll meanwhile
			errs <- lease.Release(context.Background())
		})
		// The first waiter holds the turn and polls; the others line up.
		f.waitInLine(t, key, i)
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if waiting, held := f.inLine(t, key); waiting == 0 && !held {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after every waiter took the lock, %d sessions still wait for the turn (held: %v)", waiting, held)
		}
	}
}

// TestMySQLStuckTurnDelaysNoWaiterForLong: a session that holds a key's turn
// and never lets it go (a process paused or cut off while it waited) holds
// up no one for long: a waiter of another Locker still takes the lock once
// it is free, by attempting out of turn.
func TestMySQLStuckTurnDelaysNoWaiterForLong(t *testing.T) {
	f := newTurnFixture(t)
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	const key = "invoice-7"
	holder, err := f.locker(t).Acquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := f.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stuck.Close() }()
	var got int
	if err := stuck.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", sqllock.TurnName(f.schema, sqllock.DefaultTable, key)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("taking the turn: %d, %v", got, err)
	}
	waiter := f.locker(t)
	done := make(chan error, 1)
	go func() {
		lease, err := waiter.Acquire(ctx, key, ttl, lock.WithWait(20*time.Second))
		if err == nil {
			err = lease.Release(ctx)
		}
		done <- err
	}()
	f.waitInLine(t, key, 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a waiter behind a turn nobody gives back did not get the free lock: %v", err)
	}
}

// TestMySQLTurnsLeaveConnectionsForTheLeases: Lockers on pools of two
// connections contending for several keys take no more than half of each
// pool for turns, so statements (renewals among them) always find a
// connection, and every Acquire completes.
func TestMySQLTurnsLeaveConnectionsForTheLeases(t *testing.T) {
	f := newTurnFixture(t)
	// Turns that took every connection would hold up the statements until
	// this ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const keys, lockers, rounds = 3, 3, 5
	var wg sync.WaitGroup
	errs := make(chan error, keys*lockers)
	for range lockers {
		db := openMySQL(t, f.dsn)
		db.SetMaxOpenConns(2)
		l, err := sqllock.New(ctx, db, sqllock.MySQL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		for k := range keys {
			wg.Go(func() {
				for range rounds {
					lease, err := l.Acquire(ctx, fmt.Sprint("sku-", k), lock.WithTTL(time.Second), lock.WithWait(30*time.Second))
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(5 * time.Millisecond)
					if err := lease.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestMySQLReleaseJoinsTheLine: four services take and release one lock in
// a loop, as workers draining a queue of one account's payments do. A
// service that just released the lock while the others wait joins the line
// behind them rather than take the lock back before the next in line
// wakes: the lock goes round, and seldom to the same service twice in a row.
func TestMySQLReleaseJoinsTheLine(t *testing.T) {
	f := newTurnFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const key, services, total = "account-1234", 4, 200
	var (
		mu      sync.Mutex
		history []int
		wg      sync.WaitGroup
	)
	errs := make(chan error, services)
	for s := range services {
		l := f.locker(t)
		wg.Go(func() {
			for {
				lease, err := l.Acquire(ctx, key, lock.WithTTL(5*time.Second), lock.WithWait(30*time.Second))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				history = append(history, s)
				n := len(history)
				mu.Unlock()
				if err := lease.Release(ctx); err != nil {
					errs <- err
					return
				}
				if n >= total {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	repeats := 0
	for i := 1; i < len(history); i++ {
		if history[i] == history[i-1] {
			repeats++
		}
	}
	// Until every service waits, and as the last ones stop, a service may
	// find nobody in line: a few repeats are no unfairness.
	if repeats > len(history)/20 {
		t.Fatalf("%d of %d acquisitions went to the service that had just released the lock, while others waited: %v", repeats, len(history), history)
	}
}

// TestMySQLReleaseOutlivesItsTurn: the server kills the session that holds
// a key's turn (an operator's KILL, a restart of the connection) while its
// Locker holds the lock under it. The release still frees the lock, on
// another connection, so the next service need not wait out the lease.
func TestMySQLReleaseOutlivesItsTurn(t *testing.T) {
	f := newTurnFixture(t)
	const key = "refund-99"
	second := f.takeInTurn(t, f.locker(t), key, lock.WithTTL(30*time.Second))
	var session sql.NullInt64
	if err := f.admin.QueryRow("SELECT IS_USED_LOCK(?)", sqllock.TurnName(f.schema, sqllock.DefaultTable, key)).Scan(&session); err != nil || !session.Valid {
		t.Fatalf("the holder under its turn holds no turn: %v, %v", session, err)
	}
	if _, err := f.admin.Exec(fmt.Sprintf("KILL %d", session.Int64)); err != nil {
		t.Fatal(err)
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatalf("release after the turn's session was killed: %v", err)
	}
	f.mustBeFree(t, key)
}

// TestMySQLGivingUpLeavesTheLine: waiters that give up (their context ends,
// or their wait limit) leave the line and give their turn back, so no
// session holds or waits for a turn nobody wants, and the next release is
// free for anyone.
func TestMySQLGivingUpLeavesTheLine(t *testing.T) {
	f := newTurnFixture(t)
	ctx, ttl := t.Context(), lock.WithTTL(5*time.Second)
	const key = "payout-3"
	holder, err := f.locker(t).Acquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := f.locker(t).Acquire(ctx, key, ttl, lock.WithWait(1500*time.Millisecond))
		first <- err
	}()
	f.waitInLine(t, key, 0) // the first waiter holds the turn
	wctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := f.locker(t).Acquire(wctx, key, ttl)
		second <- err
	}()
	f.waitInLine(t, key, 1)
	cancel()
	if err := <-second; err == nil {
		t.Fatal("a waiter whose context ended took the lock")
	}
	if err := <-first; err == nil {
		t.Fatal("a waiter whose wait limit passed took the lock")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		waiting, held := f.inLine(t, key)
		if waiting == 0 && !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after both waiters gave up, %d sessions still wait for the turn (held: %v)", waiting, held)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	f.mustBeFree(t, key)
}

// TestMySQLCloseGivesTheTurnsBack: a Locker closed while one of its leases
// holds the lock under a turn gives the turn back at once; the lease is
// still released as usual, and the next service takes the lock.
func TestMySQLCloseGivesTheTurnsBack(t *testing.T) {
	f := newTurnFixture(t)
	const key = "chargeback-5"
	l := f.locker(t)
	second := f.takeInTurn(t, l, key, lock.WithTTL(30*time.Second))
	if _, held := f.inLine(t, key); !held {
		t.Fatal("the lease taken in turn holds no turn")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, held := f.inLine(t, key); held {
		t.Fatal("a closed Locker still holds a turn")
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatalf("release after Close: %v", err)
	}
	f.mustBeFree(t, key)
}

// behindTurnHolder starts l's Acquire of key while another service holds
// key under its turn, waits until l's Locker stands in line for the turn,
// and returns the holder's lease, for the caller to release, and where l's
// Acquire returns its lease.
func (f turnFixture) behindTurnHolder(t *testing.T, ctx context.Context, l lock.Locker, key string, opts ...lock.Option) (*lock.Lease, <-chan *lock.Lease, <-chan error) {
	t.Helper()
	holder := f.takeInTurn(t, f.locker(t), key, lock.WithTTL(5*time.Second))
	got := make(chan *lock.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, key, append(opts, lock.WithWait(20*time.Second))...)
		if err != nil {
			errs <- err
			return
		}
		got <- lease
	}()
	f.waitInLine(t, key, 1)
	return holder, got, errs
}

// TestMySQLHandOverBetweenProcessesIsOneStatement: a payment worker of one
// process waits for an account's lock that a worker of another process
// holds. When the holder releases, the statement that waited in line for
// the turn takes the lock as the turn comes: the waiter's Acquire returns
// with no attempt after the release, one statement where a wake-up and an
// attempt took two.
func TestMySQLHandOverBetweenProcessesIsOneStatement(t *testing.T) {
	f := newTurnFixture(t)
	ctx := t.Context()
	const key = "account-77"
	c := new(sqlcount.Counter)
	db, err := sqlcount.Open("mysql", f.dsn, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	l, err := sqllock.New(ctx, db, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	holder, got, errs := f.behindTurnHolder(t, ctx, l, key, lock.WithTTL(5*time.Second))
	before := c.Load()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease := leaseOf(t, got, errs)
	after := c.Load()
	if lease.Token() <= holder.Token() {
		t.Errorf("the token went from %d to %d", holder.Token(), lease.Token())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := after - before; n != 1 {
		t.Fatalf("from the holder's release until the waiter held the lock, the waiter's Locker ran %d statements, not 1 (the one that waited in line)", n)
	}
	f.mustBeFree(t, key)
}

// TestMySQLLeaseTakenInTurnIsKeptToItsDeadline: the lock a turn takes for a
// waiting call is counted by the server from when the statement that waited
// for the turn began. The lease the call gets must not outlive the row: the
// row's expiry is no earlier than the lease's deadline, for a renewed lease
// (what is left of the lease) and for a fixed one (renewed to the full TTL
// before the call returns).
func TestMySQLLeaseTakenInTurnIsKeptToItsDeadline(t *testing.T) {
	f := newTurnFixture(t)
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprint("fixed=", fixed), func(t *testing.T) {
			ctx := t.Context()
			key := fmt.Sprint("refund-", fixed)
			opts := []lock.Option{lock.WithTTL(5 * time.Second)}
			if fixed {
				opts = append(opts, lock.WithFixedTTL())
			}
			holder, got, errs := f.behindTurnHolder(t, ctx, f.locker(t), key, opts...)
			// The waiter's statement has waited for the turn a while,
			// longer than the lease's margin for clock rates.
			time.Sleep(300 * time.Millisecond)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			lease := leaseOf(t, got, errs)
			defer func() { _ = lease.Release(ctx) }()
			var expires int64
			if err := f.admin.QueryRow("SELECT expires_at FROM "+sqllock.DefaultTable+" WHERE `key` = ?", key).Scan(&expires); err != nil {
				t.Fatal(err)
			}
			if deadline := lease.Deadline().UnixMilli(); expires < deadline {
				t.Fatalf("the row expires %d ms before the lease's deadline", deadline-expires)
			}
		})
	}
}

// TestMySQLWaiterGivingUpAsItsTurnComes: a waiter gives up (its request
// was cancelled) just as the holder releases and its Locker's turn takes
// the lock for it. The lock taken for nobody is released at once, not kept
// to the end of its 30-second lease: the next service gets it within
// seconds, round after round.
func TestMySQLWaiterGivingUpAsItsTurnComes(t *testing.T) {
	f := newTurnFixture(t)
	const key = "subscription-9"
	for round := range 8 {
		wctx, cancel := context.WithCancel(t.Context())
		holder, got, gaveUp := f.behindTurnHolder(t, wctx, f.locker(t), key, lock.WithTTL(30*time.Second))
		released := make(chan error, 1)
		go func() { released <- holder.Release(t.Context()) }()
		// Cancel the waiter somewhere around the release's round trip.
		time.Sleep(time.Duration(round) * 200 * time.Microsecond)
		cancel()
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		select {
		case lease := <-got: // it took the lock before it gave up
			if err := lease.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		case err := <-gaveUp:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: the waiter gave up with %v, not its context's end", round, err)
			}
		}
		next, err := f.locker(t).Acquire(t.Context(), key, lock.WithWait(10*time.Second))
		if err != nil {
			t.Fatalf("round %d: the lock taken for a waiter that gave up was kept: %v", round, err)
		}
		if err := next.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMySQLSchemaChangeIsNotStuckBehindTheLine: the statement that waits in
// line for a key's turn holds the lock table's metadata lock while it
// waits, which a schema change of the table (a migration adding a column)
// must wait out. While a holder keeps the lock for as long as it likes, a
// schema change still goes through, since each statement in line waits a
// second at most: it would otherwise wait for the line, and every
// statement on the table would queue behind it.
func TestMySQLSchemaChangeIsNotStuckBehindTheLine(t *testing.T) {
	f := newTurnFixture(t)
	ctx := t.Context()
	const key = "inventory-31"
	holder, got, errs := f.behindTurnHolder(t, ctx, f.locker(t), key, lock.WithTTL(30*time.Second))
	conn, err := f.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// The server gives up on the change after 20 s of waiting for the
	// table, far longer than a second in line.
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 20"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE "+sqllock.DefaultTable+" COMMENT = 'migrated'"); err != nil {
		t.Fatalf("a schema change waited out the line for the lock: %v", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("the holder's lease did not outlast the schema change (its renewals queued behind it): %v", err)
	}
	if err := leaseOf(t, got, errs).Release(ctx); err != nil {
		t.Fatal(err)
	}
}
