package sqllock_test

import (
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/internal/modetest"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// TestOneNameOneResourceSQLite: in one SQLite file (the database "latchkey
// run" uses by default), a lock, an election, a read-write lock and a
// semaphore of one name exclude each other; an acquisition in one mode while
// another holds the name is refused, naming that mode. Each handle is a
// database connection of its own, as another process's would be.
func TestOneNameOneResourceSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "modes.db")
	// The file, in WAL mode, with every mode's tables, before the parallel
	// subtests open it: a journal mode being set meanwhile is busy.
	if _, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite); err != nil {
		t.Fatal(err)
	}
	modetest.Run(t, modetest.Harness{
		Lock: func(t *testing.T) lock.Locker {
			l, err := sqllock.New(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		RW: func(t *testing.T) *rwlock.Locker {
			l, err := sqllock.NewRW(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Semaphore: func(t *testing.T) *semaphore.Client {
			c, err := sqllock.NewSemaphores(t.Context(), openSQLite(t, path), sqllock.SQLite)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		Key: func(t *testing.T) string { return t.Name() },
	})
}
