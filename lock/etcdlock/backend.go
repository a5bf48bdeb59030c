package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// cleanupTimeout bounds the best-effort calls that withdraw a key or revoke
// a lease nobody will use again. If one fails the lease simply expires.
const cleanupTimeout = time.Second

// maxIdleLeases bounds the idle leases a Locker keeps per lease TTL for
// reuse; one more is revoked instead. It covers one lease per concurrent
// holder for the concurrency a service typically runs.
const maxIdleLeases = 256

// backend implements driver.Backend with one etcd lease and one key per
// contender (see the package doc).
type backend struct {
	c      Client
	prefix string
	ka     *keeper

	owners waitq.Registry[*contender] // by Manager owner
	idle   leasePool
}

var (
	_ driver.Backend         = (*backend)(nil)
	_ driver.BoundedAcquirer = (*backend)(nil)
	_ driver.ServerQueue     = (*backend)(nil)
)

func newBackend(c Client, o options) *backend {
	return &backend{c: c, prefix: o.prefix, ka: newKeeper(c)}
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
	// A queued contender (its Acquire waits) keeps its key in the queue
	// between attempts, kept alive and watching its predecessor.
	waitq.Waiter

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
}

func newContender() *contender { return &contender{} }

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

// putIdle keeps c's lease, whose key is known to be deleted, for reuse, and
// detaches it from c. It returns false, leaving c as it is, when the pool is
// full or closed.
func (b *backend) putIdle(c *contender) bool {
	if !b.idle.put(c.secs, idleLease{id: c.lease, granted: c.leaseTTL, until: c.until}) {
		return false
	}
	c.lease, c.rev = 0, 0
	return true
}

// closeTimeout bounds Close.
const closeTimeout = 5 * time.Second

// close revokes the idle leases that may still live, stops pooling and
// closes the keep-alive streams.
func (b *backend) close() error {
	defer b.ka.close()
	if err := b.idle.close(b.c); err != nil {
		return fmt.Errorf("etcdlock: close: revoke idle leases: %w", err)
	}
	return nil
}

// A leasePool keeps granted leases with no key attached, by requested lease
// TTL in seconds, for the next Acquire with the same TTL, until it is
// closed. The zero value is empty and ready for use.
type leasePool struct {
	mu     sync.Mutex
	idle   map[int64][]idleLease // guarded by mu
	closed bool                  // close was called: no more pooling; guarded by mu
}

// take returns an idle lease for secs, most recently used first, or false.
// Leases whose expiry may have come are dropped: they hold no key and
// expire on the server by themselves.
func (p *leasePool) take(secs int64, now time.Time) (idleLease, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.idle[secs]
	for len(s) > 0 {
		l := s[len(s)-1]
		s = s[:len(s)-1]
		if now.Before(l.until) {
			p.idle[secs] = s
			return l, true
		}
	}
	delete(p.idle, secs)
	return idleLease{}, false
}

// put keeps l, asked for secs, for reuse, and reports whether it did: not
// when the pool is full or closed.
func (p *leasePool) put(secs int64, l idleLease) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || secs == 0 || len(p.idle[secs]) >= maxIdleLeases {
		return false
	}
	if p.idle == nil {
		p.idle = map[int64][]idleLease{}
	}
	p.idle[secs] = append(p.idle[secs], l)
	return true
}

// close stops pooling and revokes, within closeTimeout, the kept leases that
// may still live. It returns the first error but a lease's being gone.
func (p *leasePool) close(c Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	var first error
	now := time.Now()
	for _, s := range idle {
		for _, l := range s {
			if !now.Before(l.until) {
				// It may have expired, holding nothing: a revoke would
				// only fail (and clientv3 log a warning).
				continue
			}
			if _, err := c.Revoke(ctx, l.id); err != nil && first == nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				first = err
			}
		}
	}
	return first
}

// TryAcquire implements driver.Backend: it puts the owner's key if it is not
// in the queue yet and holds the lock when that key has the lowest create
// revision under the name, the rule concurrency.Mutex follows.
//
// The key's lease is one kept from an earlier lock of this Locker when there
// is one, else a new grant. When the lease is not already known to outlive
// the lock's TTL counted from now, a keep-alive refreshes it in parallel with
// the attempt, and the lock is held only once that keep-alive confirmed a
// full TTL.
func (b *backend) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	token, _, holderTTL, err := b.tryAcquire(ctx, owner, b.request(name, ttl, wholeTTL))
	return token, holderTTL, err
}

// TryAcquirePartial implements driver.BoundedAcquirer: TryAcquire, except
// that a kept lease confirmed at most a third of the TTL ago is used as it
// is, without the keep-alive, and the lock is reported certain only for what
// is left of that lease. A renewed lease is in that state just before each
// renewal; the Manager renews this one when it is due, in the background.
func (b *backend) TryAcquirePartial(ctx context.Context, name, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	return b.tryAcquire(ctx, owner, b.request(name, ttl, partialTTL))
}

// A leaseNeed says for how much of the lock's TTL the lease an attempt takes
// must be certain to live.
type leaseNeed int

const (
	wholeTTL   leaseNeed = iota // the whole TTL from the attempt's start (TryAcquire)
	partialTTL                  // what is left of a lease confirmed at most TTL/3 ago will do (TryAcquirePartial)
)

// A request is what the attempts of one TryAcquire or TryAcquirePartial
// call ask for.
type request struct {
	name  string        // the lock's key
	pfx   string        // the lock's queue: <prefix><name>/
	ttl   time.Duration // the lock's TTL
	secs  int64         // ttl as a lease TTL (ttlSeconds)
	need  leaseNeed
	reuse bool // an idle lease may serve: not once a lease was found gone
}

func (b *backend) request(name string, ttl time.Duration, need leaseNeed) request {
	return request{name: name, pfx: b.prefix + name + "/", ttl: ttl, secs: ttlSeconds(ttl), need: need, reuse: true}
}

// A place is where an attempt found a contender's key in its lock's queue;
// it means nothing when the attempt failed.
type place int

const (
	keyGone   place = iota + 1 // not in the queue: its lease expired or an operator deleted it
	keyBehind                  // in the queue, behind another key
	keyFirst                   // at the head: the contender holds the lock
)

// tryAcquire is TryAcquire and TryAcquirePartial: an attempt, made once more
// on a new lease if the first found its lease gone; then the lock, or for an
// Acquire that waits a place in the queue, or nothing.
func (b *backend) tryAcquire(ctx context.Context, owner string, r request) (uint64, time.Duration, time.Duration, error) {
	c := b.owners.GetOrAdd(owner, newContender)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, c.label, _ = lock.ParseOwner(owner)
	at, valid, err := b.attempt(ctx, c, r)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The key's lease expired (a queued key while the server was
		// unreachable for longer than its TTL, an idle lease revoked by an
		// operator) and its key with it: queue again with a new lease.
		c.stopQueueLocked()
		c.lease, c.rev = 0, 0
		r.reuse = false
		at, valid, err = b.attempt(ctx, c, r)
	}
	switch {
	case err == nil && at == keyFirst:
		c.stopQueueLocked()
		c.held = true
		return uint64(c.rev), valid, 0, nil
	case !c.Queued(): // an Acquire that does not wait leaves no key behind
		b.withdraw(ctx, c)
		b.owners.Forget(owner, c)
		return 0, 0, 0, cmp.Or(err, lock.ErrNotAcquired)
	case err != nil:
		return 0, 0, 0, err
	}
	return 0, 0, 0, b.wait(ctx, c, r.pfx)
}

// wait leaves c, a waiting Acquire's contender whose key is behind another,
// in the queue, watching its predecessor with its lease kept alive. It
// returns lock.ErrNotAcquired, or the error of the predecessor's read.
func (b *backend) wait(ctx context.Context, c *contender, pfx string) error {
	if err := b.watchPredecessor(ctx, c, pfx); err != nil {
		return err
	}
	b.keepQueued(c)
	return lock.ErrNotAcquired
}

// attempt makes sure c has a lease and a key in r's queue and reports where
// that key stands, and for how long from now its lease is certain to live:
// r.ttl, confirmed by a keep-alive if need be, or for a partial request, what
// is left of a lease confirmed at most r.ttl/3 ago. An error wrapping
// rpctypes.ErrLeaseNotFound means the lease is gone, and its key with it.
func (b *backend) attempt(ctx context.Context, c *contender, r request) (place, time.Duration, error) {
	start := time.Now()
	if c.lease == 0 {
		l, err := b.lease(ctx, r, start)
		if err != nil {
			return 0, 0, err
		}
		c.attach(l, r)
	}
	valid := c.validity(start, r.ttl)
	var ka *refresh
	if r.needsRefresh(valid) {
		valid, ka = r.ttl, b.startRefresh(ctx, c.lease)
	}
	at, err := b.enqueue(ctx, c, r.name, r.pfx)
	kaErr := ka.confirm(c, start, r.ttl)
	switch {
	case err != nil:
		return at, 0, err
	case at == keyGone:
		// Our key is gone (its lease expired, or an operator deleted
		// it): queue again.
		err = fmt.Errorf("etcdlock: queued key %q is gone: %w", c.key, rpctypes.ErrLeaseNotFound)
		b.drop(ctx, c)
		return at, 0, err
	case kaErr != nil:
		return at, 0, kaErr
	}
	return at, valid, nil
}

// lease returns a lease for r's lock, known at now to live on the server
// until its until: an idle one if r.reuse and one may still live, else a new
// grant.
func (b *backend) lease(ctx context.Context, r request, now time.Time) (idleLease, error) {
	if r.reuse {
		if l, ok := b.idle.take(r.secs, now); ok {
			return l, nil
		}
	}
	g, err := b.c.Grant(ctx, r.secs)
	if err != nil {
		return idleLease{}, err
	}
	granted := time.Duration(g.TTL) * time.Second
	return idleLease{id: g.ID, granted: granted, until: now.Add(granted)}, nil
}

// attach makes l c's lease, for a key in r's queue not written yet.
func (c *contender) attach(l idleLease, r request) {
	c.lease, c.secs, c.leaseTTL, c.until = l.id, r.secs, l.granted, l.until
	c.key, c.rev = fmt.Sprintf("%s%x", r.pfx, int64(l.id)), 0
}

// validity returns how long from start c's lease is certain to live, as far
// as a lock of ttl is concerned: ttl when the lease outlives the lock, else
// what is left of it less the clock-rate allowance.
func (c *contender) validity(start time.Time, ttl time.Duration) time.Duration {
	valid := ttl
	if !covers(c.until, c.leaseTTL, start, ttl) {
		valid = c.until.Sub(start) - lock.DriftMargin(c.leaseTTL)
	}
	return valid
}

// needsRefresh reports whether a lease certain to live for valid needs a
// keep-alive to serve r: it does not outlive the lock and, for a partial
// request, was not confirmed at most r.ttl/3 ago.
func (r request) needsRefresh(valid time.Duration) bool {
	return valid < r.ttl && (r.need == wholeTTL || valid < 2*r.ttl/3)
}

// enqueue makes sure c's key is in the queue under pfx and reports where it
// stands. A key not queued yet (c.rev == 0) is put, unless it exists, in the
// transaction that reads the head, and c.rev becomes its create revision; a
// queued key is only compared with the head, which costs no raft write.
func (b *backend) enqueue(ctx context.Context, c *contender, name, pfx string) (place, error) {
	if c.rev != 0 {
		g, err := b.c.Get(ctx, pfx, clientv3.WithFirstCreate()...)
		if err != nil {
			return 0, err
		}
		return c.placeIn(g.Kvs), nil
	}
	modes := modeOps(b.prefix, name, lock.ModeLock)
	resp, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
		Then(append([]clientv3.Op{clientv3.OpPut(c.key, c.label, clientv3.WithLease(c.lease)), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)}, modes...)...).
		Else(append([]clientv3.Op{clientv3.OpGet(c.key), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)}, modes...)...).
		Commit()
	if err != nil {
		return 0, err
	}
	if err := modeOf(name, lock.ModeLock, resp.Responses); err != nil {
		if resp.Succeeded {
			c.rev = resp.Header.Revision // the key to withdraw
		}
		return 0, err
	}
	if resp.Succeeded {
		c.rev = resp.Header.Revision
	} else {
		c.rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	return c.placeIn(resp.Responses[1].GetResponseRange().Kvs), nil
}

// placeIn returns where c's key stands in a queue whose head is the one key
// of head, if any: a head created after c's key means c's key is gone.
func (c *contender) placeIn(head []*mvccpb.KeyValue) place {
	switch {
	case len(head) == 0 || head[0].CreateRevision > c.rev:
		return keyGone
	case head[0].CreateRevision == c.rev:
		return keyFirst
	default:
		return keyBehind
	}
}

// A refresh is a keep-alive of a contender's lease, sent alongside an
// attempt's transaction or read.
type refresh struct {
	done chan struct{} // closed once ttl and err are set
	ttl  int64         // the TTL the server granted, in seconds
	err  error
}

// startRefresh sends a keep-alive of lease id on a goroutine of its own;
// confirm waits for its answer.
func (b *backend) startRefresh(ctx context.Context, id clientv3.LeaseID) *refresh {
	ka := &refresh{done: make(chan struct{})}
	go func() {
		defer close(ka.done)
		ka.ttl, ka.err = b.ka.keepAliveOnce(ctx, id)
	}()
	return ka
}

// confirm waits for the keep-alive, if one was sent (ka is not nil), and
// applies its answer to c: a lease confirmed for at least ttl lives until
// start plus the TTL granted; a lease found gone took c's key with it. It
// returns the error that fails the attempt, nil if the lease serves the lock.
func (ka *refresh) confirm(c *contender, start time.Time, ttl time.Duration) error {
	if ka == nil {
		return nil
	}
	<-ka.done
	switch {
	case ka.err != nil:
		if errors.Is(ka.err, rpctypes.ErrLeaseNotFound) {
			c.rev = 0 // deleted with the lease
		}
		return ka.err
	case time.Duration(ka.ttl)*time.Second < ttl:
		return fmt.Errorf("etcdlock: server granted a %d s lease for a %v lock", ka.ttl, ttl)
	}
	c.until = start.Add(time.Duration(ka.ttl) * time.Second)
	return nil
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

// Renew implements driver.Backend: one keep-alive of the key's lease and,
// in parallel, a read that the key is still there with our create revision
// (an operator may have deleted it: etcd #6127, #10811).
func (b *backend) Renew(ctx context.Context, name, owner string, ttl time.Duration) error {
	c := b.owners.Get(owner)
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
	b.owners.Forget(owner, c)
}

// Release implements driver.Backend: it deletes the key, which only this
// contender writes (see deleteKey), and learns from the count deleted
// whether the key was still there. The lease, now without a key, is kept for the Locker's next lock; if the
// key was already gone, or the outcome is unknown, the lease is revoked.
func (b *backend) Release(ctx context.Context, name, owner string) error {
	c := b.owners.Take(owner)
	if c == nil {
		return lockerr.NotHeld("etcdlock: no lease for this owner")
	}
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
