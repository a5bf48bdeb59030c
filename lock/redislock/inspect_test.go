package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

func TestOperator(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker { return newLocker(t, newClient(t, addr), WithPrefix(prefix)) },
	})
}

func TestOperatorCluster(t *testing.T) {
	nodes := startCluster(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker { return newLocker(t, newClusterClient(t, nodes)) },
	})
}

// scanCounter counts the SCAN commands a client sends.
type scanCounter struct{ n atomic.Int64 }

func (*scanCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scanCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "scan") {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (*scanCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A queue stuck behind one of 100,000 held locks: listing them pages through
// SCAN a bounded number of calls at a time, never the whole keyspace.
func TestListIsBoundedOnALargeKeyspace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 keys")
	}
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	admin := newClient(t, addr)
	ctx := ctxT(t)
	const n = 100_000
	owner := strings.Repeat("ab", 16) + " bulk"
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, redisnode.LockKey(prefix, fmt.Sprintf("queue:%06d", i)))
	}
	t.Cleanup(func() {
		for i := 0; i < n; i += 10_000 {
			admin.Unlink(context.Background(), names[i:i+10_000]...)
		}
	})
	for i := 0; i < n; i += 10_000 {
		pipe := admin.Pipeline()
		for _, name := range names[i : i+10_000] {
			pipe.Set(ctx, name, owner, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}

	c := newClient(t, addr)
	var scans scanCounter
	c.AddHook(&scans)
	l := newLocker(t, c, WithPrefix(prefix))
	page, err := lock.List(ctx, l, "queue:", 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Locks) != 50 || page.Cursor == "" {
		t.Fatalf("List(limit 50) = %d locks, cursor %q; want 50 and a cursor", len(page.Locks), page.Cursor)
	}
	if got := scans.n.Load(); got < 1 || got > redisnode.MaxScansPerPage {
		t.Fatalf("one page took %d SCAN calls, want 1 to %d", got, redisnode.MaxScansPerPage)
	}
	for _, in := range page.Locks {
		if !in.Held || in.Holder != "bulk" || !strings.HasPrefix(in.Key, "queue:") || in.TimeLeft != lock.Unknown {
			t.Fatalf("listed %+v", in)
		}
	}
	scans.n.Store(0)
	next, err := lock.List(ctx, l, "queue:", 50, page.Cursor)
	if err != nil || len(next.Locks) != 50 || next.Cursor == "" {
		t.Fatalf("second page: %d locks, cursor %q, %v", len(next.Locks), next.Cursor, err)
	}
	if got := scans.n.Load(); got > redisnode.MaxScansPerPage {
		t.Fatalf("the second page took %d SCAN calls", got)
	}

	for _, bad := range []string{"nonsense", "0-x-", "-1-0-", "0-0-%%%"} {
		if _, err := lock.List(ctx, l, "queue:", 50, bad); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("List(cursor %q) = %v, want ErrInvalid", bad, err)
		}
	}
}
