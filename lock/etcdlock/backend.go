package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/lock"
)

// cleanupTimeout bounds the best-effort calls that withdraw a key or revoke
// a lease nobody will use again. If one fails the lease simply expires.
const cleanupTimeout = time.Second

// backend implements lock.Backend with one etcd lease and one key per
// contender (see the package doc).
type backend struct {
	c      Client
	prefix string

	mu     sync.Mutex
	owners map[string]*contender // by Manager owner; guarded by mu
}

var (
	_ lock.Backend      = (*backend)(nil)
	_ lock.OwnerWatcher = (*backend)(nil)
)

func newBackend(c Client, o options) *backend {
	return &backend{c: c, prefix: o.prefix, owners: map[string]*contender{}}
}

// A contender is one Acquire's key in a lock's queue, from its first attempt
// until it is released, lost or withdrawn.
type contender struct {
	// queued is set for an Acquire that waits (it called WatchReleaseOwner):
	// its key stays in the queue between attempts, kept alive and watching its
	// predecessor. Otherwise a failed attempt withdraws the key at once.
	queued bool
	wake   chan struct{} // queued only; buffered, coalescing

	mu        sync.Mutex // serialises the calls for this owner, guards the rest
	lease     clientv3.LeaseID
	leaseTTL  time.Duration // as granted by the server
	key       string        // <prefix><name>/<lease hex>
	rev       int64         // key's create revision, 0 until known
	held      bool
	pred      string // predecessor key being watched ("" if none)
	predRev   int64
	stopPred  context.CancelFunc // stops the predecessor watch
	stopAlive context.CancelFunc // stops the queued keep-alive
	wg        sync.WaitGroup     // the contender's goroutines
}

func (b *backend) contender(owner string, create bool) *contender {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.owners[owner]
	if c == nil && create {
		c = &contender{}
		b.owners[owner] = c
	}
	return c
}

func (b *backend) forget(owner string) {
	b.mu.Lock()
	delete(b.owners, owner)
	b.mu.Unlock()
}

// ttlSeconds rounds a lock TTL up to etcd's whole-second lease TTL. The
// server may grant more (its minimum is 1.5 election timeouts, 2 s by
// default), never less.
func ttlSeconds(ttl time.Duration) int64 {
	return max(int64((ttl+time.Second-1)/time.Second), 1)
}

// TryAcquire implements lock.Backend: it puts the owner's key if it is not
// in the queue yet and holds the lock when that key has the lowest create
// revision under the name, the rule concurrency.Mutex follows.
func (b *backend) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	c := b.contender(owner, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	pfx := b.prefix + name + "/"
	fresh := false // the lease was granted during this call
	var resp *clientv3.TxnResponse
	for attempt := 0; ; attempt++ {
		if c.lease == 0 {
			g, err := b.c.Grant(ctx, ttlSeconds(ttl))
			if err != nil {
				return 0, 0, err
			}
			c.lease, c.leaseTTL = g.ID, time.Duration(g.TTL)*time.Second
			c.key, c.rev, fresh = fmt.Sprintf("%s%x", pfx, int64(g.ID)), 0, true
		}
		var err error
		resp, err = b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
			Then(clientv3.OpPut(c.key, "", clientv3.WithLease(c.lease)), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Else(clientv3.OpGet(c.key), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// A queued key's lease expired (the server was unreachable
			// for longer than its TTL): queue again with a new lease.
			c.stopQueueLocked()
			c.lease = 0
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		break
	}
	if resp.Succeeded {
		c.rev = resp.Header.Revision
	} else {
		c.rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	first := resp.Responses[1].GetResponseRange().Kvs
	if len(first) == 1 && first[0].CreateRevision == c.rev {
		return b.hold(ctx, c, owner, fresh)
	}
	if !c.queued {
		b.withdraw(ctx, c)
		b.forget(owner)
		return 0, 0, lock.ErrNotAcquired
	}
	if err := b.watchPredecessor(ctx, c, pfx); err != nil {
		return 0, 0, err
	}
	b.keepQueued(c)
	return 0, 0, lock.ErrNotAcquired
}

// hold finishes an attempt that found the owner's key first in the queue.
func (b *backend) hold(ctx context.Context, c *contender, owner string, fresh bool) (uint64, time.Duration, error) {
	c.stopQueueLocked()
	if !fresh {
		// The Manager counts the lease from before this call, but the server
		// counts it from the last keep-alive of the queued key, which may be
		// up to a third of its TTL ago. Refresh it, so the server's expiry is
		// never earlier than the holder's local deadline.
		if _, err := b.c.KeepAliveOnce(ctx, c.lease); err != nil {
			b.withdraw(ctx, c)
			b.forget(owner)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// The lease expired while the server was unreachable and
				// its revocation is deleting our key now: we never held
				// the lock. A waiting Acquire queues again.
				return 0, 0, lock.ErrNotAcquired
			}
			return 0, 0, fmt.Errorf("etcdlock: refresh the lease of a key that reached the head of the queue: %w", err)
		}
	}
	c.held = true
	return uint64(c.rev), 0, nil
}

// withdraw removes c's key by revoking its lease, which deletes the keys
// attached to it and no others: only c's own key.
func (b *backend) withdraw(ctx context.Context, c *contender) {
	if c.lease == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = b.c.Revoke(rctx, c.lease)
	c.lease, c.rev = 0, 0
}

// Renew implements lock.Backend: one KeepAliveOnce on the key's lease, then
// a read that the key is still there with our create revision (an operator
// may have deleted it: etcd #6127, #10811).
func (b *backend) Renew(ctx context.Context, name, owner string, ttl time.Duration) error {
	c := b.contender(owner, false)
	if c == nil {
		return fmt.Errorf("%w: etcdlock: no lease for this owner", lock.ErrNotHeld)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		return fmt.Errorf("%w: etcdlock: not held", lock.ErrNotHeld)
	}
	ka, err := b.c.KeepAliveOnce(ctx, c.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		id := c.lease
		b.lost(ctx, c, owner)
		return fmt.Errorf("%w: etcdlock: lease %x expired on the server", lock.ErrNotHeld, int64(id))
	}
	if err != nil {
		return err
	}
	if time.Duration(ka.TTL)*time.Second < ttl {
		return fmt.Errorf("etcdlock: server granted a %d s lease for a %v lock", ka.TTL, ttl)
	}
	g, err := b.c.Get(ctx, c.key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != c.rev {
		b.lost(ctx, c, owner)
		return fmt.Errorf("%w: etcdlock: key %q was deleted", lock.ErrNotHeld, c.key)
	}
	return nil
}

// lost forgets a held contender whose key is gone and revokes its lease.
func (b *backend) lost(ctx context.Context, c *contender, owner string) {
	c.held = false
	b.withdraw(ctx, c)
	b.forget(owner)
}

// Release implements lock.Backend: a transaction that deletes the key only
// if it still has our create revision (never a blind delete: etcd #22082),
// then a revoke of its lease.
func (b *backend) Release(ctx context.Context, name, owner string) error {
	c := b.contender(owner, false)
	if c == nil {
		return fmt.Errorf("%w: etcdlock: no lease for this owner", lock.ErrNotHeld)
	}
	b.forget(owner)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopQueueLocked()
	c.held = false
	if c.rev == 0 {
		b.withdraw(ctx, c)
		return fmt.Errorf("%w: etcdlock: no key was written", lock.ErrNotHeld)
	}
	resp, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
		Then(clientv3.OpDelete(c.key)).
		Commit()
	b.withdraw(ctx, c)
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcdlock: key %q is gone", lock.ErrNotHeld, c.key)
	}
	return nil
}
