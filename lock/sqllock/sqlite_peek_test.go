package sqllock_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// On SQLite a waiter's attempt on a held lock is refused by a read, which
// waits for no writer: twenty processes polling a held lock with a write
// each kept SQLite's one writer slot so busy that some waited longer than
// a minute, the holder's renewal too. Here another connection holds the
// write lock while a try-once Acquire of a held lock, and of a name held
// as a read-write lock, must still answer at once.
func TestSQLiteRefusalTakesNoWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "locks.db")
	newLocker := func() *sqllock.Locker {
		l, err := sqllock.New(ctx, openSQLite(t, path), sqllock.SQLite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b := newLocker(), newLocker()
	held, err := a.Acquire(ctx, "held", lock.WithTTL(time.Minute), lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(context.Background()) }()
	rw, err := sqllock.NewRW(ctx, openSQLite(t, path), sqllock.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := rw.RLock(ctx, "prices", lock.WithTTL(time.Minute), lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Release(context.Background()) }()

	holdWriteLock(t, path) // as another process would, until the checks are done

	// Without the read each attempt would wait for the write lock until its
	// context ends; the bound is a failure timeout.
	check := func(key string, want error) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if l, err := b.Acquire(actx, key, lock.WithWait(0)); !errors.Is(err, want) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("try-once of %q while the write lock is held = %v, want %v", key, err, want)
		}
	}
	check("held", lock.ErrNotAcquired)
	check("prices", lock.ErrOtherMode)
}

// holdWriteLock makes another connection take the SQLite file's write lock
// (BEGIN IMMEDIATE) and keep it until the test ends.
func holdWriteLock(t *testing.T, path string) {
	t.Helper()
	conn, err := openSQLite(t, path).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		_ = conn.Close()
	})
}
