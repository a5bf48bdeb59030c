package etcdlock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchReleaseOwner implements driver.ServerQueue. It marks owner's attempts as
// those of a waiting Acquire: they leave their key in the queue, keep its lease
// alive and watch only the key just ahead of it (no herd). stop withdraws the
// key unless the Acquire got the lock.
func (b *backend) WatchReleaseOwner(ctx context.Context, key, owner string) (<-chan struct{}, func(), error) {
	c := newContender()
	wake, stop := b.owners.Wait(owner, c, &c.mu, func() bool { return b.leaveLocked(ctx, c) })
	return wake, stop, nil
}

// stopQueueLocked stops the predecessor watch and the queued keep-alive.
func (c *contender) stopQueueLocked() {
	if c.stopPred != nil {
		c.stopPred()
		c.stopPred, c.pred, c.predRev = nil, "", 0
	}
	if c.stopAlive != nil {
		c.stopAlive()
		c.stopAlive = nil
	}
}

// watchPredecessor makes sure c watches for the deletion of the key just
// ahead of its own.
func (b *backend) watchPredecessor(ctx context.Context, c *contender, pfx string) error {
	g, err := b.c.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(c.rev-1))...)
	if err != nil {
		return err
	}
	if len(g.Kvs) == 0 {
		// The keys ahead left between the two reads: try again now.
		c.Signal()
		return nil
	}
	pred, rev := string(g.Kvs[0].Key), g.Kvs[0].CreateRevision
	if c.stopPred != nil && c.pred == pred && c.predRev == rev {
		return nil
	}
	if c.stopPred != nil {
		c.stopPred()
	}
	wctx, cancel := context.WithCancel(context.Background())
	c.stopPred, c.pred, c.predRev = cancel, pred, rev
	c.Go(func() { b.waitDelete(wctx, c, pred, rev) })
	return nil
}

// waitDelete signals c when key (created at rev) is deleted, or when the
// watch ends for any other reason than ctx (a spurious wake-up only costs an
// attempt).
//
// concurrency.Mutex watches from the revision at which it read the key; that
// revision is usually in the past by the time the watch is created, which
// puts the watcher in etcd's unsynced group, served every 100 ms: the hand-off
// floor measured in ANCHORS.md. Watching from "now" keeps the watcher synced;
// a read after the watch is confirmed closes the gap between the two.
func (b *backend) waitDelete(ctx context.Context, c *contender, key string, rev int64) {
	defer func() {
		if ctx.Err() == nil {
			c.Signal()
		}
	}()
	wch := b.c.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithCreatedNotify())
	for wr := range wch {
		if wr.Err() != nil {
			return
		}
		if wr.Created {
			g, err := b.c.Get(ctx, key, clientv3.WithKeysOnly())
			if err != nil || len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != rev {
				return
			}
			continue
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return
			}
		}
	}
}

// keepQueued keeps a queued key's lease alive while its Acquire waits: the
// Manager renews only held leases.
func (b *backend) keepQueued(c *contender) {
	if c.stopAlive != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopAlive = cancel
	lease, every := c.lease, max(c.leaseTTL/3, 100*time.Millisecond)
	c.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			kctx, kcancel := context.WithTimeout(ctx, every)
			_, err := b.ka.keepAliveOnce(kctx, lease)
			kcancel()
			if err != nil && ctx.Err() == nil {
				// Possibly expired: let the Acquire try, which queues
				// again with a new lease if so.
				c.Signal()
			}
		}
	})
}

// leaveLocked ends c's wait: it stops c's watches and withdraws its place in
// the queue unless it holds the lock, and reports whether it does.
func (b *backend) leaveLocked(ctx context.Context, c *contender) bool {
	c.stopQueueLocked()
	if !c.held {
		b.withdraw(ctx, c)
	}
	return c.held
}
