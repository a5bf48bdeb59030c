package zklock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

func TestOperator(t *testing.T) {
	srv := startZK(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker { return newLocker(t, srv) },
	})
}

// A Python worker's kazoo Lock holds a path: the operator sees kazoo's node
// and identifier as the holder, when it was created, and in a listing.
func TestOperatorSeesKazooHolder(t *testing.T) {
	srv := startZK(t)
	ours := newLocker(t, srv, zklock.WithPrefix("/locks"), zklock.WithNodeNames(zklock.KazooNames))
	kazoo := startKazoo(t, kazooScript, srv.Endpoint(), "/locks/shared")
	kazoo.expect("held")
	ctx := t.Context()
	info, err := lock.Inspect(ctx, ours, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder != "kazoo" || !strings.HasPrefix(info.Entry, "/locks/shared/") ||
		!strings.Contains(info.Entry, "__lock__") || info.Token == 0 || info.Waiters != 0 ||
		time.Since(info.AcquiredAt) > time.Minute || info.TimeLeft != lock.Unknown {
		t.Fatalf("Inspect while kazoo holds = %+v", info)
	}
	page, err := lock.List(ctx, ours, "sh", 10, "")
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Entry != info.Entry {
		t.Fatalf("List = %+v, %v; want kazoo's lock", page, err)
	}
	kazoo.send("")
	kazoo.expect("released")
	if info, err := lock.Inspect(ctx, ours, "shared"); err != nil || info.Held {
		t.Fatalf("after kazoo released, Inspect = %+v, %v", info, err)
	}
}
