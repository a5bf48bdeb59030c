package lockurl_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// TestOpenSemaphores opens two Clients from each URL and checks that they
// share the permits of one name: two of two taken, the third refused.
func TestOpenSemaphores(t *testing.T) {
	urls := map[string]string{
		"sqlite":   "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "sems.db")),
		"redis":    "redis://" + testsvc.RedisAddr(t),
		"postgres": testsvc.PostgresURL(t),
		"mysql":    testsvc.MySQLURL(t),
	}
	for name, raw := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			a, b := opened(t, raw, lockurl.OpenSemaphores), opened(t, raw, lockurl.OpenSemaphores)
			key := testsvc.KeyPrefix(t) + "jobs"
			sa, _ := a.Semaphore(key, 2)
			sb, _ := b.Semaphore(key, 2)
			p1, err := sa.Acquire(ctx, lock.WithWait(0))
			if err != nil {
				t.Fatal(err)
			}
			p2, err := sb.Acquire(ctx, lock.WithWait(0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Acquire(ctx, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("a third permit of 2 = %v, want ErrNotAcquired", err)
			}
			_ = p1.Release(ctx)
			_ = p2.Release(ctx)
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

func TestOpenSemaphoresRefuses(t *testing.T) {
	for _, raw := range []string{"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "nope://x", "mem://host", "zk://"} {
		if s, err := lockurl.OpenSemaphores(t.Context(), raw); !errors.Is(err, lock.ErrInvalid) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("OpenSemaphores(%q) = %v, want ErrInvalid", raw, err)
		}
	}
	s, err := lockurl.OpenSemaphores(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}
