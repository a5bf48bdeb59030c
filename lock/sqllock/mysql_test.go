package sqllock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

func openMySQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	return testsvc.OpenDB(t, "mysql", dsn)
}

// TestMySQLConformance runs the suite on MariaDB (or MySQL), once with the
// driver's default affected-row counts and once with clientFoundRows=true, since a
// user may open the database either way.
func TestMySQLConformance(t *testing.T) {
	for _, found := range []string{"false", "true"} {
		t.Run("clientFoundRows="+found, func(t *testing.T) {
			dsn := testsvc.MySQL(t, "clientFoundRows", found)
			admin := openMySQL(t, dsn)
			var (
				mu  sync.Mutex
				dbs []*sql.DB
			)
			locktest.Run(t, locktest.Harness{
				New: func(t *testing.T) lock.Locker {
					db := testsvc.OpenDB(t, "mysql", dsn)
					mu.Lock()
					dbs = append(dbs, db)
					mu.Unlock()
					l, err := sqllock.New(t.Context(), db, sqllock.Detect)
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				// Deleting the row also checks that tokens keep rising without it.
				Revoke: func(t *testing.T, key string) {
					if _, err := admin.Exec("DELETE FROM latchkey_locks WHERE `key` = ?", key); err != nil {
						t.Fatal(err)
					}
				},
				// The shared server is not ours to restart: every client
				// dropping its connections is what a restart does to them,
				// and the rows stay as a restart keeps them.
				Restart: func(t *testing.T) {
					mu.Lock()
					defer mu.Unlock()
					for _, db := range dbs {
						_ = db.Close()
					}
					dbs = nil
				},
			})
		})
	}
}

// TestMySQLKeysAreBytes: keys differing only in case, or in bytes that are
// not UTF-8, are different locks, as on every other backend.
func TestMySQLKeysAreBytes(t *testing.T) {
	l, err := sqllock.New(t.Context(), openMySQL(t, testsvc.MySQL(t)), sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	var leases []*lock.Lease
	for _, k := range []string{"order-A", "order-a", "order-\xff", "order-\xfe", "order-a "} {
		lease, err := l.Acquire(t.Context(), k, lock.WithWait(0))
		if err != nil {
			t.Fatalf("Acquire(%q) with the others held: %v", k, err)
		}
		leases = append(leases, lease)
	}
	// Renewed in one batch: hex in the JSON keeps every byte.
	time.Sleep(2 * time.Second)
	for _, lease := range leases {
		if err := lease.Release(t.Context()); err != nil {
			t.Fatalf("Release %q: %v", lease.Key(), err)
		}
	}
}

// TestMySQLBatchRenewal holds many leases on one connection and checks they
// all survive several renewal rounds, which run through one statement per
// tick.
func TestMySQLBatchRenewal(t *testing.T) {
	db := openMySQL(t, testsvc.MySQL(t))
	l, err := sqllock.New(t.Context(), db, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	leases := make([]*lock.Lease, n)
	for i := range leases {
		if leases[i], err = l.Acquire(t.Context(), fmt.Sprintf("batch:%d", i), lock.WithTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// One lease is taken from its holder behind its back: the batch must
	// report that one lost and keep the others.
	if _, err := db.Exec("UPDATE latchkey_locks SET owner = 'someone else' WHERE `key` = 'batch:7'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	for i, lease := range leases {
		if i == 7 {
			if !errors.Is(lease.Err(), lock.ErrLeaseLost) {
				t.Errorf("the taken lease's Err = %v, want ErrLeaseLost", lease.Err())
			}
			continue
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("lease %d lost during batch renewal: %v", i, err)
		}
		if err := lease.Release(t.Context()); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// TestMySQLKilledConnection kills the holder's connection on the server
// (KILL CONNECTION from another session) mid-lease, again and again: the
// holder reconnects and keeps its lease, and no one else gets the lock
// while it does; after the release someone does, with a higher token.
func TestMySQLKilledConnection(t *testing.T) {
	dsn := testsvc.MySQL(t)
	admin := openMySQL(t, dsn)
	db := openMySQL(t, dsn)
	db.SetMaxOpenConns(1) // one connection: the one killed
	holder, err := sqllock.New(t.Context(), db, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	lease, err := holder.Acquire(t.Context(), "k", lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		var id int64
		if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 2) // a renewal falls in here, on the dead connection
		if got, err := other.Acquire(t.Context(), "k", lock.WithWait(0)); err == nil {
			select {
			case <-lease.Done():
				t.Fatalf("holder lost its lease to a killed connection (%v), though the server was there to reconnect to", lease.Err())
			default:
				t.Fatalf("another client acquired (token %d) while the holder still held its lease", got.Token())
			}
		} else if !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatal(err)
		}
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("holder lost its lease to killed connections: %v", err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := other.Acquire(t.Context(), "k", lock.WithWait(0))
	if err != nil {
		t.Fatalf("lock not free after release: %v", err)
	}
	if got.Token() <= lease.Token() {
		t.Fatalf("successor token %d <= holder's %d", got.Token(), lease.Token())
	}
	_ = got.Release(t.Context())
}

// TestMySQLHolderTTLHint: a waiter learns how long the holder has left, and
// waits by polling (MySQL has no NOTIFY) yet gets the lock soon after its
// release.
func TestMySQLHolderTTLHint(t *testing.T) {
	dsn := testsvc.MySQL(t)
	a, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := a.Acquire(t.Context(), "k", lock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(t.Context(), "k", lock.WithWait(30*time.Second))
		if err == nil {
			err = l.Release(t.Context())
		}
		got <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

func TestMySQLBadInput(t *testing.T) {
	db := openMySQL(t, testsvc.MySQL(t))
	for _, table := range []string{"locks; DROP TABLE x", strings.Repeat("a", 64)} {
		if _, err := sqllock.New(t.Context(), db, sqllock.MySQL, sqllock.WithTable(table)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("WithTable(%q) = %v, want ErrInvalid", table, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad input created %d tables (err %v)", n, err)
	}
}

func TestMySQLOperator(t *testing.T) {
	dsn := testsvc.MySQL(t)
	// Create the table once: concurrent CREATE TABLE IF NOT EXISTS collide.
	if _, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL); err != nil {
		t.Fatal(err)
	}
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, err := sqllock.New(t.Context(), openMySQL(t, dsn), sqllock.MySQL)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}
