package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/lock/zklock"
)

// TestCancelledAcquireLeavesNoNode cancels plain Acquire calls at many
// points, from before their create is sent to after it is answered. Once a
// call has returned, no node of ours may be left in its lock's queue: one
// left behind is ephemeral, so it would block the lock for as long as the
// Locker stays connected (a create still unsent when the lookup of its
// GUID was sent escaped that lookup).
func TestCancelledAcquireLeavesNoNode(t *testing.T) {
	srv := startZK(t)
	l := newLocker(t, srv)
	admin := plainConn(t, srv)
	const calls = 400
	var cancelled, acquired int
	for i := range calls {
		key := fmt.Sprintf("cancel-%d", i)
		ctx, cancel := context.WithCancel(t.Context())
		// Cancel from 0 to 4 ms in: ZooKeeper on loopback answers a create
		// in well under a millisecond, so the points cover the whole call.
		stop := time.AfterFunc(time.Duration(i%200)*20*time.Microsecond, cancel)
		lease, err := l.Acquire(ctx, key)
		stop.Stop()
		cancel()
		switch {
		case err == nil:
			acquired++
			if err := lease.Release(t.Context()); err != nil {
				t.Fatalf("%s: Release: %v", key, err)
			}
		case errors.Is(err, context.Canceled):
			cancelled++
		default:
			t.Fatalf("%s: Acquire: %v", key, err)
		}
	}
	t.Logf("%d of %d calls cancelled, %d acquired", cancelled, calls, acquired)
	// A create abandoned in flight reaches the server within a round trip;
	// give it far more, then look.
	time.Sleep(time.Second)
	for i := range calls {
		dir := zklock.DefaultPrefix + "/" + fmt.Sprintf("cancel-%d", i)
		children, _, err := admin.Children(dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if len(children) > 0 {
			t.Errorf("%s: nodes %v left after a cancelled Acquire returned", dir, children)
		}
	}
}
