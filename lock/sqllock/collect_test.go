package sqllock

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestTakeInTurnCollectedByAnotherCall: a key's turn took the lock for one
// waiting call of a Locker, and another of its calls attempts first (the
// Locker's own queue put that one ahead). The attempting call gets the lock
// under its own name, with the token the turn took, and releases it; the
// call the turn took it for holds nothing, and a try of the Locker takes
// nothing either. (Which call the turn picks is decided in the instant two
// calls begin to wait, so the case is set up here by hand.)
func TestTakeInTurnCollectedByAnotherCall(t *testing.T) {
	ctx := t.Context()
	const key, ttl = "ledger-12", 5 * time.Second
	picked, first := "0123456789abcdef-picked", "0123456789abcdef-first"
	b, _, token, stop := takenInTurn(t, key, picked, ttl)
	defer stop()
	_, stopFirst := b.turns.watch(key, first)
	defer stopFirst()

	// A try of the Locker (a call that does not wait) does not take it.
	if _, _, _, err := b.tryAcquireMySQL(ctx, key, "0123456789abcdef-try", ttl, true); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a try took the lock the turn took for a waiting call: %v", err)
	}
	got, valid, _, err := b.tryAcquireMySQL(ctx, key, first, ttl, true)
	if err != nil {
		t.Fatalf("the call that attempted did not get the lock its turn took: %v", err)
	}
	if got != token || valid <= 0 || valid > ttl {
		t.Fatalf("collected token %d valid for %v; want token %d, valid within the lease", got, valid, token)
	}
	if err := b.Renew(ctx, key, picked, ttl); err == nil {
		t.Fatal("the call the turn took the lock for still holds it")
	}
	if err := b.Renew(ctx, key, first, ttl); err != nil {
		t.Fatalf("the lock is not held under the collecting call's name: %v", err)
	}
	if err := b.Release(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.TryAcquire(ctx, key, "fedcba9876543210-next", ttl); err != nil {
		t.Fatalf("the lock is not free after its release: %v", err)
	}
}

// TestTakeInTurnForACallThatGaveUp: a key's turn took the lock for a
// waiting call, which gives up before it collects it (its request was
// cancelled in that instant). The lock is released on the turn's session,
// with the turn, rather than kept to the end of its lease.
func TestTakeInTurnForACallThatGaveUp(t *testing.T) {
	ctx := t.Context()
	const key, ttl = "ledger-13", 30 * time.Second
	b, db, _, stop := takenInTurn(t, key, "0123456789abcdef-gave-up", ttl)
	name := b.turns.turnName(key)
	stop() // the call gives up
	b.turns.running.Wait()
	if _, _, err := b.TryAcquire(ctx, key, "fedcba9876543210-next", ttl); err != nil {
		t.Fatalf("the lock taken for a call that gave up was kept: %v", err)
	}
	var holder sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder.Valid {
		t.Fatalf("the turn is still held, by session %d", holder.Int64)
	}
}

// takenInTurn returns the backend of a Locker on a MySQL database of the
// test's own, and the database, as a turn's statement leaves them: a
// session holds key's turn and took the lock, with token, for owner, a
// waiting call (stop ends its wait) that has not collected it.
func takenInTurn(t *testing.T, key, owner string, ttl time.Duration) (b *backend, db *sql.DB, token uint64, stop func()) {
	t.Helper()
	ctx := t.Context()
	db = testsvc.OpenDB(t, "mysql", testsvc.MySQL(t))
	l, err := New(ctx, db, MySQL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	b = l.backend
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", b.turns.turnName(key)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("taking the turn: %d, %v", got, err)
	}
	sent := time.Now()
	if token, _, err = b.TryAcquire(ctx, key, owner, ttl); err != nil {
		t.Fatal(err)
	}
	_, stop = b.turns.watch(key, owner)
	b.turns.mu.Lock()
	g := b.turns.gates[key]
	g.turn, g.holder = &turn{conn: conn}, owner
	g.taken = &taken{owner: owner, token: int64(token), sent: sent, ttl: ttl}
	b.turns.open.Add(1)
	b.turns.unlock()
	return b, db, token, stop
}
