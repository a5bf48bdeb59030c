package lockurl_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

func openRW(t *testing.T, raw string) *lockurl.RWLocker {
	t.Helper()
	return opened(t, raw, lockurl.OpenRW)
}

// rwExcludes checks that a and b, opened from one URL, share read-write
// locks: a's writer keeps b's reader out, and readers of both share.
func rwExcludes(t *testing.T, a, b *lockurl.RWLocker, name string) {
	t.Helper()
	ctx := t.Context()
	w, err := a.Lock(ctx, name, lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RLock(ctx, name, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a reader got in under another Locker's writer: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ra, err := a.RLock(ctx, name, lock.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.RLock(ctx, name, lock.WithWait(0))
	if err != nil {
		t.Fatalf("readers of two Lockers do not share: %v", err)
	}
	if rb.Token() <= w.Token() || ra.Token() <= w.Token() {
		t.Fatalf("readers' tokens %d, %d not above the writer's %d", ra.Token(), rb.Token(), w.Token())
	}
	_ = ra.Release(ctx)
	_ = rb.Release(ctx)
}

func TestOpenRW(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		raw := "sqlite://" + filepath.Join(t.TempDir(), "rw.db")
		rwExcludes(t, openRW(t, raw), openRW(t, raw), "k")
	})
	t.Run("mem", func(t *testing.T) {
		l := openRW(t, "mem://")
		rwExcludes(t, l, l, "k")
	})
	t.Run("postgres", func(t *testing.T) {
		raw := testsvc.PostgresURL(t)
		rwExcludes(t, openRW(t, raw), openRW(t, raw), testsvc.KeyPrefix(t)+"k")
	})
	t.Run("redis", func(t *testing.T) {
		addr := testsvc.RedisAddr(t)
		raw := "redis://" + addr
		name := testsvc.KeyPrefix(t) + "k"
		rwExcludes(t, openRW(t, raw), openRW(t, raw+"/0"), name)
		// The fencing counter would stay a day on the shared server.
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		if err := c.Del(t.Context(), redisnode.RWKeys(redislock.DefaultPrefix, name)...).Err(); err != nil {
			t.Error(err)
		}
	})
	t.Run("etcd", func(t *testing.T) {
		raw := "etcd://" + testsvc.StartEtcd(t).Endpoint()
		rwExcludes(t, openRW(t, raw), openRW(t, raw), "k")
	})
	t.Run("zk", func(t *testing.T) {
		raw := "zk://" + testsvc.StartZooKeeper(t, "maxSessionTimeout=40000").Endpoint()
		rwExcludes(t, openRW(t, raw), openRW(t, raw), "k")
	})
	for _, raw := range []string{"mysql://root@127.0.0.1:3306/test", "redlock://a:1,b:2,c:3"} {
		if _, err := lockurl.OpenRW(t.Context(), raw); !errors.Is(err, lockurl.ErrUnsupported) || !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("OpenRW(%q) = %v, want ErrUnsupported", raw, err)
		}
	}
}
