package zklock

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// WatchReleaseOwner implements lock.OwnerWatcher. It marks owner's attempts
// as those of a waiting Acquire: they leave their node in the queue and watch
// only the contender just ahead of it (no herd). stop withdraws the node
// unless the Acquire got the lock.
func (b *backend) WatchReleaseOwner(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	c := &contender{queued: true, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	b.owners[owner] = c
	b.mu.Unlock()
	stop := func() {
		c.mu.Lock()
		c.stopPredLocked()
		held := c.held
		if !held {
			b.withdraw(ctx, c)
		}
		c.mu.Unlock()
		if !held {
			b.forget(owner, c)
		}
		c.wg.Wait()
	}
	return c.wake, stop, nil
}

func (c *contender) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
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
		c.signal()
		return nil
	}
	stop := make(chan struct{})
	c.stopPred, c.pred = stop, pred
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-w.ev: // deleted, or the session ended: either way, try again
			c.signal()
		case <-stop:
		}
	}()
	return nil
}
