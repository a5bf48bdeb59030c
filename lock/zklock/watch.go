package zklock

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// WatchReleaseOwner implements driver.ServerQueue. It marks owner's attempts
// as those of a waiting Acquire: they leave their node in the queue and watch
// only the contender just ahead of it (no herd). stop withdraws the node
// unless the Acquire got the lock.
func (b *backend) WatchReleaseOwner(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	c := newContender()
	wake, stop := b.owners.Wait(owner, c, &c.mu, func() bool { return b.leaveLocked(ctx, c) })
	return wake, stop, nil
}

// leaveLocked ends c's wait: it stops c's watches and withdraws its place in
// the queue unless it holds the lock, and reports whether it does.
func (b *backend) leaveLocked(ctx context.Context, c *contender) bool {
	c.stopPredLocked()
	if !c.held {
		b.withdraw(ctx, c)
	}
	return c.held
}

func (c *contender) stopPredLocked() {
	if c.stopPred != nil {
		close(c.stopPred)
		c.stopPred, c.pred = nil, ""
	}
}

// watchPredecessor makes sure c watches for the deletion of pred, the
// contender just ahead of it. If pred is already gone it signals at once.
func (b *backend) watchPredecessor(ctx context.Context, c *contender, pred string) error {
	if c.stopPred != nil && c.pred == pred {
		return nil
	}
	c.stopPredLocked()
	type watch struct {
		ok bool
		ev <-chan zk.Event
	}
	w, err := call(ctx, b, func() (watch, error) {
		ok, _, ev, err := b.conn.ExistsW(c.dir + "/" + pred)
		return watch{ok, ev}, err
	})
	if err != nil {
		return err
	}
	if !w.ok {
		// Gone between the listing and the watch (the watch, set on a
		// missing node, fires only if it is created again): try now.
		c.Signal()
		return nil
	}
	stop := make(chan struct{})
	c.stopPred, c.pred = stop, pred
	c.Go(func() {
		select {
		case <-w.ev: // deleted, or the session ended: either way, try again
			c.Signal()
		case <-stop:
		}
	})
	return nil
}
