package sqllock

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestHolderTTLHint checks a failed attempt reports how long the holder has
// left: waiters time their next attempt by it.
func TestHolderTTLHint(t *testing.T) {
	check := func(t *testing.T, l *Locker) {
		key := testsvc.KeyPrefix(t) + "k"
		const ttl = 10 * time.Second
		if _, _, err := l.backend.TryAcquire(t.Context(), key, "a", ttl); err != nil {
			t.Fatal(err)
		}
		_, left, err := l.backend.TryAcquire(t.Context(), key, "b", ttl)
		if !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("second TryAcquire = %v, want ErrNotAcquired", err)
		}
		if left <= ttl/2 || left > ttl {
			t.Fatalf("holder's remaining lease reported as %v, want about %v", left, ttl)
		}
		if err := l.backend.Release(t.Context(), key, "a"); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		db := testsvc.OpenDB(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "h.db"), testsvc.MaxOpenConns(0))
		l, err := New(t.Context(), db, SQLite)
		if err != nil {
			t.Fatal(err)
		}
		check(t, l)
	})
	t.Run("postgres", func(t *testing.T) {
		pool := testsvc.OpenPgx(t, testsvc.PostgresURL(t))
		l, err := NewPgx(t.Context(), pool)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		check(t, l)
	})
}
