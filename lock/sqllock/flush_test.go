package sqllock

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// commitWaits runs q with args in a transaction that begins with
// synchronous_commit on, and reports whether its commit would still wait
// for the log flush (the transaction is rolled back: nothing changes).
func commitWaits(t *testing.T, pool *pgxpool.Pool, q string, args ...any) bool {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var mode string
	if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode != "off"
}

// TestOnlyHintsSkipTheLogFlush checks which PostgreSQL statements commit
// without waiting for the log to reach the disk. A release, a refused
// attempt's mark and its place in the queue are hints: lost in a crash of
// the server, a release leaves the lock to expire and a lost mark or queue
// row costs a wake-up, never a second holder or a token issued twice. So
// they do not wait (on a disk that flushes in 3 ms, two flushes per
// acquire-and-release pair became one). An acquisition, a renewal, a
// hand-over and a relabel change who holds the lock, its token or its
// expiry: they wait, whatever the hints around them do.
func TestOnlyHintsSkipTheLogFlush(t *testing.T) {
	f := newQueueFixture(t, "latchkey_flush_test")
	l := f.locker()
	b, q, key, ttl := l.backend, l.backend.q, f.key, int64(10_000)
	a1, a2, b1 := lockerA+"1", lockerA+"2", lockerB+"1"
	check := func(what string, want bool, query string, args ...any) {
		t.Helper()
		if got := commitWaits(t, f.pool, query, args...); got != want {
			t.Errorf("%s: the commit waits for the flush = %v, want %v", what, got, want)
		}
	}
	check("taking a free lock", true, q.acquire, key, a1, ttl)
	check("a waiting Acquire taking a free lock", true, q.acquireWaiting, key, a1, ttl)
	if _, _, err := b.TryAcquire(t.Context(), key, a1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	check("a refused attempt that marks the row", false, q.acquire, key, b1, ttl)
	check("a refused attempt that queues", false, q.acquireWaiting, key, b1, ttl)
	check("a renewal", true, q.renew, key, a1, ttl)
	check("a batch renewal", true, q.batch, []string{key}, []string{a1}, []int64{ttl})
	check("a relabel", true, q.relabel, key, a1, a2, keyHash(key))
	check("a release", false, q.release, key, a1, keyHash(key))
	check("a hand-over to the Locker's next waiter", true, q.handover, key, a1, a2, ttl, keyHash(key))
	// Another Locker's waiter queues and marks the row: a hand-over now
	// frees the lock for everyone, a release.
	if _, err := f.pool.Exec(t.Context(), q.acquireWaiting, key, b1, ttl); err != nil {
		t.Fatal(err)
	}
	check("a hand-over that frees the lock for another Locker", false, q.handover, key, a1, a2, ttl, keyHash(key))
	check("leaving the queue", false, q.dequeue, key, lockerB)
	if got := f.queued(); len(got) != 1 {
		t.Fatalf("queue = %v, want the one waiting Locker", got)
	}
	if err := b.Release(t.Context(), key, a1); err != nil {
		t.Fatal(err)
	}
	check("taking a lock promised to the Locker", true, q.acquireWaiting, key, b1, ttl)
}

// TestOtherModesReleasesSkipTheLogFlush checks that the releases of a
// semaphore's permits and of a read-write lock are hints too: lost in a
// crash, the holder's row stays until its lease ends.
func TestOtherModesReleasesSkipTheLogFlush(t *testing.T) {
	f := newQueueFixture(t, "latchkey_flush_modes")
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.pool.Exec(t.Context(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	sem := newSemQueries(Postgres, f.table+"_s")
	rw, err := newRWQueries(Postgres, f.table+"_rw")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(sem.migrate, rw.migrate...) {
		exec(q)
	}
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+f.table+"_s, "+f.table+"_s"+holdersSuffix+", "+f.table+"_rw, "+f.table+"_rw_holders")
	})
	far := time.Now().Add(time.Hour).UnixMilli()
	exec("INSERT INTO "+f.table+"_s"+holdersSuffix+" (name, owner, permits, token, expires_at) VALUES ($1, $2, 1, 1, $3)", f.key, lockerA, far)
	exec("INSERT INTO "+f.table+"_rw_holders (name, owner, mode, expires_at, token) VALUES ($1, $2, 'r', $3, 1)", f.key, lockerA, far)
	if commitWaits(t, f.pool, sem.release, f.key, lockerA, keyHash(f.key)) {
		t.Error("a semaphore's release waits for the log flush")
	}
	if commitWaits(t, f.pool, rw.releaseNotify, f.key, lockerA, "r", keyHash(f.key)) {
		t.Error("a read-write lock's release waits for the log flush")
	}
}
