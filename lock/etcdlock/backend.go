package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/lock"
)

// cleanupTimeout bounds the best-effort calls that withdraw a key or revoke
// a lease nobody will use again. If one fails the lease simply expires.
const cleanupTimeout = time.Second

// maxIdleLeases bounds the idle leases a Locker keeps per lease TTL for
// reuse; one more is revoked instead. It covers one lease per concurrent
// holder for the concurrency a service typically runs.
const maxIdleLeases = 256

// backend implements lock.Backend with one etcd lease and one key per
// contender (see the package doc).
type backend struct {
	c      Client
	prefix string
	ka     *keeper

	mu     sync.Mutex
	owners map[string]*contender // by Manager owner; guarded by mu
	idle   map[int64][]idleLease // by requested lease TTL in seconds; guarded by mu
	closed bool                  // Close was called: no more pooling; guarded by mu
}

var (
	_ lock.Backend         = (*backend)(nil)
	_ lock.PartialAcquirer = (*backend)(nil)
	_ lock.OwnerWatcher    = (*backend)(nil)
)

func newBackend(c Client, o options) *backend {
	return &backend{c: c, prefix: o.prefix, ka: newKeeper(c), owners: map[string]*contender{}, idle: map[int64][]idleLease{}}
}

// An idleLease is a granted lease with no key attached, kept for the next
// Acquire with the same TTL.
type idleLease struct {
	id      clientv3.LeaseID
	granted time.Duration // TTL as granted by the server
	until   time.Time     // see contender.until
}

// A contender is one Acquire's key in a lock's queue, from its first attempt
// until it is released, lost or withdrawn.
type contender struct {
	// queued is set for an Acquire that waits (it called WatchReleaseOwner):
	// its key stays in the queue between attempts, kept alive and watching its
	// predecessor. Otherwise a failed attempt withdraws the key at once.
	queued bool
	wake   chan struct{} // queued only; buffered, coalescing

	mu       sync.Mutex // serialises the calls for this owner, guards the rest
	lease    clientv3.LeaseID
	secs     int64         // the lease TTL asked for, in seconds (its idle pool)
	leaseTTL time.Duration // as granted by the server
	// until is when the lease's server expiry is known not to have come yet,
	// by our clock: the send time of its last confirmed grant or keep-alive
	// plus the granted TTL (the server counts from when the request arrives,
	// which is later).
	until     time.Time
	key       string // <prefix><name>/<lease hex>
	label     string // the holder label: the key's value
	rev       int64  // key's create revision, 0 until known
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

// covers reports whether a lease known to live on the server until until,
// granted for granted, outlives a lock of ttl taken at start, with the same
// allowance for clock rates the Manager makes: the lease's own local deadline
// is not before the lock's.
func covers(until time.Time, granted time.Duration, start time.Time, ttl time.Duration) bool {
	return !until.Add(-lock.DriftMargin(granted)).Before(start.Add(ttl - lock.DriftMargin(ttl)))
}

// takeIdle returns an idle lease for secs, most recently used first, or
// false. Leases whose expiry may have come are dropped: they hold no key and
// expire on the server by themselves.
func (b *backend) takeIdle(secs int64, now time.Time) (idleLease, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.idle[secs]
	for len(s) > 0 {
		l := s[len(s)-1]
		s = s[:len(s)-1]
		if now.Before(l.until) {
			b.idle[secs] = s
			return l, true
		}
	}
	delete(b.idle, secs)
	return idleLease{}, false
}

// putIdle keeps c's lease, whose key is known to be deleted, for reuse, and
// detaches it from c. It returns false, leaving c as it is, when the pool is
// full or closed.
func (b *backend) putIdle(c *contender) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || c.secs == 0 || len(b.idle[c.secs]) >= maxIdleLeases {
		return false
	}
	b.idle[c.secs] = append(b.idle[c.secs], idleLease{id: c.lease, granted: c.leaseTTL, until: c.until})
	c.lease, c.rev = 0, 0
	return true
}

// closeTimeout bounds Close.
const closeTimeout = 5 * time.Second

// close revokes the idle leases that may still live, stops pooling and
// closes the keep-alive streams.
func (b *backend) close() error {
	defer b.ka.close()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	b.mu.Lock()
	b.closed = true
	idle := b.idle
	b.idle = map[int64][]idleLease{}
	b.mu.Unlock()
	var first error
	now := time.Now()
	for _, s := range idle {
		for _, l := range s {
			if !now.Before(l.until) {
				// It may have expired, holding nothing: a revoke would
				// only fail (and clientv3 log a warning).
				continue
			}
			if _, err := b.c.Revoke(ctx, l.id); err != nil && first == nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				first = err
			}
		}
	}
	if first != nil {
		return fmt.Errorf("etcdlock: close: revoke idle leases: %w", first)
	}
	return nil
}

// TryAcquire implements lock.Backend: it puts the owner's key if it is not
// in the queue yet and holds the lock when that key has the lowest create
// revision under the name, the rule concurrency.Mutex follows.
//
// The key's lease is one kept from an earlier lock of this Locker when there
// is one, else a new grant. When the lease is not already known to outlive
// the lock's TTL counted from now, a keep-alive refreshes it in parallel with
// the attempt, and the lock is held only once that keep-alive confirmed a
// full TTL.
func (b *backend) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	token, _, holderTTL, err := b.tryAcquire(ctx, name, owner, ttl, false)
	return token, holderTTL, err
}

// TryAcquirePartial implements lock.PartialAcquirer: TryAcquire, except
// that a kept lease confirmed at most a third of the TTL ago is used as it
// is, without the keep-alive, and the lock is reported certain only for what
// is left of that lease. A renewed lease is in that state just before each
// renewal; the Manager renews this one when it is due, in the background.
func (b *backend) TryAcquirePartial(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	return b.tryAcquire(ctx, name, owner, ttl, true)
}

// tryAcquire is TryAcquire, and TryAcquirePartial if partial is set.
func (b *backend) tryAcquire(ctx context.Context, name, owner string, ttl time.Duration, partial bool) (uint64, time.Duration, time.Duration, error) {
	c := b.contender(owner, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, c.label, _ = lock.ParseOwner(owner)
	pfx := b.prefix + name + "/"
	secs := ttlSeconds(ttl)
	for attempt := 0; ; attempt++ {
		first, valid, err := b.attempt(ctx, c, pfx, secs, ttl, attempt == 0, partial)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The key's lease expired (a queued key while the server was
			// unreachable for longer than its TTL, an idle lease revoked
			// by an operator) and its key with it: queue again with a new
			// lease.
			c.stopQueueLocked()
			c.lease, c.rev = 0, 0
			continue
		}
		if err != nil {
			if !c.queued {
				b.withdraw(ctx, c)
				b.forget(owner)
			}
			return 0, 0, 0, err
		}
		if first {
			c.stopQueueLocked()
			c.held = true
			return uint64(c.rev), valid, 0, nil
		}
		break
	}
	if !c.queued {
		b.withdraw(ctx, c)
		b.forget(owner)
		return 0, 0, 0, lock.ErrNotAcquired
	}
	if err := b.watchPredecessor(ctx, c, pfx); err != nil {
		return 0, 0, 0, err
	}
	b.keepQueued(c)
	return 0, 0, 0, lock.ErrNotAcquired
}

// attempt makes sure c has a lease and a key under pfx and reports whether
// that key is the first under pfx, and for how long from now its lease is
// certain to live: ttl, confirmed by a keep-alive if need be, or with partial
// set, what is left of a lease confirmed at most ttl/3 ago. An error wrapping
// rpctypes.ErrLeaseNotFound means the lease is gone, and its key with it.
func (b *backend) attempt(ctx context.Context, c *contender, pfx string, secs int64, ttl time.Duration, pooled, partial bool) (bool, time.Duration, error) {
	start := time.Now()
	if c.lease == 0 {
		l, ok := idleLease{}, false
		if pooled {
			l, ok = b.takeIdle(secs, start)
		}
		if !ok {
			g, err := b.c.Grant(ctx, secs)
			if err != nil {
				return false, 0, err
			}
			l = idleLease{id: g.ID, granted: time.Duration(g.TTL) * time.Second, until: start.Add(time.Duration(g.TTL) * time.Second)}
		}
		c.lease, c.secs, c.leaseTTL, c.until = l.id, secs, l.granted, l.until
		c.key, c.rev = fmt.Sprintf("%s%x", pfx, int64(l.id)), 0
	}

	// Refresh the lease alongside the attempt unless it already outlives
	// the lock, or, if partial, unless it was confirmed at most ttl/3 ago.
	// A keep-alive is served by the leader without a raft write.
	var (
		kaTTL int64
		kaErr error
		kaCh  chan struct{}
	)
	valid := ttl
	if !covers(c.until, c.leaseTTL, start, ttl) {
		valid = c.until.Sub(start) - lock.DriftMargin(c.leaseTTL)
	}
	if valid < ttl && (!partial || valid < 2*ttl/3) {
		valid = ttl
		kaCh = make(chan struct{})
		id := c.lease
		go func() {
			defer close(kaCh)
			kaTTL, kaErr = b.ka.keepAliveOnce(ctx, id)
		}()
	}

	var first []*mvccpb.KeyValue
	var err error
	if c.rev == 0 {
		// Not queued yet: put the key unless it exists, and read the head.
		var resp *clientv3.TxnResponse
		resp, err = b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
			Then(clientv3.OpPut(c.key, c.label, clientv3.WithLease(c.lease)), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Else(clientv3.OpGet(c.key), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Commit()
		if err == nil {
			if resp.Succeeded {
				c.rev = resp.Header.Revision
			} else {
				c.rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
			}
			first = resp.Responses[1].GetResponseRange().Kvs
		}
	} else {
		// Queued: the key is in place; a read of the head is enough, no
		// raft write.
		var g *clientv3.GetResponse
		g, err = b.c.Get(ctx, pfx, clientv3.WithFirstCreate()...)
		if err == nil {
			first = g.Kvs
			if len(first) == 0 || first[0].CreateRevision > c.rev {
				// Our key is gone (its lease expired, or an operator
				// deleted it): queue again.
				err = fmt.Errorf("etcdlock: queued key %q is gone: %w", c.key, rpctypes.ErrLeaseNotFound)
				if kaCh != nil {
					<-kaCh
				}
				b.drop(ctx, c)
				return false, 0, err
			}
		}
	}
	if kaCh != nil {
		<-kaCh
		switch {
		case kaErr != nil:
			if errors.Is(kaErr, rpctypes.ErrLeaseNotFound) {
				c.rev = 0 // deleted with the lease
			}
			if err == nil {
				err = kaErr
			}
		case time.Duration(kaTTL)*time.Second < ttl:
			if err == nil {
				err = fmt.Errorf("etcdlock: server granted a %d s lease for a %v lock", kaTTL, ttl)
			}
		default:
			c.until = start.Add(time.Duration(kaTTL) * time.Second)
		}
	}
	if err != nil {
		return false, 0, err
	}
	return len(first) == 1 && first[0].CreateRevision == c.rev, valid, nil
}

// withdraw removes c's key, if it wrote one, with a compare-and-delete, and
// keeps its lease for reuse; when that is not certain to have worked it
// revokes the lease instead, which deletes the keys attached to it and no
// others: only c's own key.
func (b *backend) withdraw(ctx context.Context, c *contender) {
	if c.lease == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if c.rev != 0 {
		if deleted, err := b.deleteKey(rctx, c); err == nil && deleted && b.putIdle(c) {
			return
		}
	}
	b.drop(rctx, c)
}

// deleteKey deletes c's key and reports whether it was still there. The key
// is c's alone: its name ends in c's lease ID, which no other client writes
// under, and this Locker gives the lease to another key only once this
// delete is confirmed (putIdle), and never after it failed (drop). So no
// compare is needed to spare the next holder's key: a late or retried delete
// (etcd #22082: a retried Unlock deletes the next holder's key, which with
// the Mutex has the same name) cannot meet a key written after it. A plain
// delete also costs the server less than a transaction with a compare.
func (b *backend) deleteKey(ctx context.Context, c *contender) (bool, error) {
	resp, err := b.c.Delete(ctx, c.key)
	if err != nil {
		return false, err
	}
	return resp.Deleted == 1, nil
}

// drop revokes c's lease (best effort) and forgets it.
func (b *backend) drop(ctx context.Context, c *contender) {
	if c.lease == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = b.c.Revoke(rctx, c.lease)
	c.lease, c.rev = 0, 0
}

// Renew implements lock.Backend: one keep-alive of the key's lease and,
// in parallel, a read that the key is still there with our create revision
// (an operator may have deleted it: etcd #6127, #10811).
func (b *backend) Renew(ctx context.Context, name, owner string, ttl time.Duration) error {
	c := b.contender(owner, false)
	if c == nil {
		return lockerr.NotHeld("etcdlock: no lease for this owner")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		return lockerr.NotHeld("etcdlock: not held")
	}
	sent := time.Now()
	var (
		g    *clientv3.GetResponse
		gErr error
		read = make(chan struct{})
	)
	go func() {
		defer close(read)
		g, gErr = b.c.Get(ctx, c.key, clientv3.WithKeysOnly())
	}()
	kaTTL, err := b.ka.keepAliveOnce(ctx, c.lease)
	<-read
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		id := c.lease
		b.lost(ctx, c, owner)
		return lockerr.NotHeld(fmt.Sprintf("etcdlock: lease %x expired on the server", int64(id)))
	}
	if err != nil {
		return err
	}
	if time.Duration(kaTTL)*time.Second < ttl {
		// The lease keeps the length granted when the lock was taken
		// (Lease.Extend asks for more).
		return fmt.Errorf("%w: etcdlock: the lock's lease is %d s, shorter than the %v asked for", lock.ErrInvalid, kaTTL, ttl)
	}
	c.until = sent.Add(time.Duration(kaTTL) * time.Second)
	if gErr != nil {
		return gErr
	}
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != c.rev {
		b.lost(ctx, c, owner)
		return lockerr.NotHeld(fmt.Sprintf("etcdlock: key %q was deleted", c.key))
	}
	return nil
}

// lost forgets a held contender whose key is gone and revokes its lease.
func (b *backend) lost(ctx context.Context, c *contender, owner string) {
	c.held = false
	b.drop(ctx, c)
	b.forget(owner)
}

// Release implements lock.Backend: it deletes the key, which only this
// contender writes (see deleteKey), and learns from the count deleted
// whether the key was still there. The lease, now without a key, is kept for the Locker's next lock; if the
// key was already gone, or the outcome is unknown, the lease is revoked.
func (b *backend) Release(ctx context.Context, name, owner string) error {
	c := b.contender(owner, false)
	if c == nil {
		return lockerr.NotHeld("etcdlock: no lease for this owner")
	}
	b.forget(owner)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopQueueLocked()
	c.held = false
	if c.rev == 0 {
		b.drop(ctx, c)
		return lockerr.NotHeld("etcdlock: no key was written")
	}
	deleted, err := b.deleteKey(ctx, c)
	if err != nil {
		b.drop(ctx, c)
		return err
	}
	if !deleted {
		b.drop(ctx, c)
		return lockerr.NotHeld(fmt.Sprintf("etcdlock: key %q is gone", c.key))
	}
	if !b.putIdle(c) {
		b.drop(ctx, c)
	}
	return nil
}
