package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// DefaultSemaphorePrefix starts every key of NewSemaphores's Client, after
// the prefix of WithPrefix if one is given: a semaphore of a Client with
// WithPrefix(p) lives under p+DefaultSemaphorePrefix, beside the locks of a
// Locker with the same prefix, so a role allowed p alone can use both.
const DefaultSemaphorePrefix = "latchkey/semaphore/"

// NewSemaphores returns a semaphore.Client whose permits live in the etcd
// cluster c talks to. Each acquisition is one key,
// <prefix><name>/<lease ID in hex>, on a lease of its own, whose value is
// "N count owner"; its create revision orders the queue and is its fencing
// token. An acquisition holds its permits when the counts of the keys before
// it and its own add up to at most N, so waiters are served strictly in
// arrival order across every Client, and one asking for several permits is
// not overtaken by later ones asking for fewer. A waiter keeps its key in
// the queue, its lease kept alive, and watches one key only: the first
// waiter watches the deletions under the name, every other its predecessor,
// which touches its key when it is admitted, so a release wakes one waiter
// and admissions wake the next in turn. A crashed holder's lease expires
// after its TTL (rounded up to whole seconds, and at least what the server
// grants) and its key with it. A key whose N differs from the others' is
// withdrawn and its Acquire fails with semaphore.ErrMismatch.
//
// It returns an error wrapping lock.ErrInvalid for a nil client and touches
// no server until the first Acquire. It never closes the client.
func NewSemaphores(c Client, opts ...Option) (*semaphore.Client, error) {
	o, err := configure(c, opts)
	if err != nil {
		return nil, err
	}
	return semaphore.New(&semBackend{c: c, prefix: o.prefix + DefaultSemaphorePrefix, lockPrefix: o.prefix, byOwner: map[string]*permit{}})
}

// semBackend is the semaphore.Backend on etcd.
type semBackend struct {
	c          Client
	prefix     string // of the semaphores' keys
	lockPrefix string // of the locks' and read-write locks' of the same names

	mu      sync.Mutex
	byOwner map[string]*permit // guarded by mu
	idle    leasePool          // released permits' leases
}

var (
	_ semaphore.Backend     = (*semBackend)(nil)
	_ semaphore.ServerQueue = (*semBackend)(nil)
	_ semaphore.Inspector   = (*semBackend)(nil)
)

// A permit is one acquisition's key, from its first attempt until it is
// released, lost or withdrawn.
type permit struct {
	mu      sync.Mutex // serialises the calls for this owner; guards the rest
	waiting bool       // an Acquire that waits watches for it (WatchReleaseOwner)
	wake    waitq.Wake
	lease   clientv3.LeaseID
	secs    int64         // the lease TTL asked for, in seconds (its idle pool)
	granted time.Duration // the lease's TTL as the server granted it
	until   time.Time     // the lease lives on the server at least until then (see contender.until)
	key     string
	rev     int64 // the key's create revision: the token
	held    bool
	queued  bool               // an attempt found it not admitted
	stop    context.CancelFunc // stops the watch and the keep-alive of a queued key
}

var errPermitNotHeld = lockerr.NotHeld("etcdlock: the permit's key is gone (expired, revoked or released)")

// errKeyGone is the answer of a touch that found a queued key gone.
var errKeyGone = errors.New("etcdlock: the queued key is gone")

func (b *semBackend) permitOf(owner string, create bool) *permit {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.byOwner[owner]
	if p == nil && create {
		p = &permit{}
		b.byOwner[owner] = p
	}
	return p
}

func (b *semBackend) forget(owner string) {
	b.mu.Lock()
	delete(b.byOwner, owner)
	b.mu.Unlock()
}

func (b *semBackend) namePrefix(name string) string { return b.prefix + name + "/" }

// value is what a key holds: "N count owner".
func value(r semaphore.Request, owner string) string {
	return strconv.Itoa(r.Permits) + " " + strconv.Itoa(r.Count) + " " + owner
}

// parseValue reads a key's value; ok is false for a value value cannot make.
func parseValue(v []byte) (permits, count int, owner string, ok bool) {
	f := strings.SplitN(string(v), " ", 3)
	if len(f) != 3 {
		return 0, 0, "", false
	}
	n, err1 := strconv.Atoi(f[0])
	k, err2 := strconv.Atoi(f[1])
	return n, k, f[2], err1 == nil && err2 == nil && n > 0 && k > 0
}

// WatchReleaseOwner implements semaphore.ServerQueue: owner's Acquire waits,
// so its key stays queued between attempts. stop withdraws it unless it
// holds.
func (b *semBackend) WatchReleaseOwner(_ context.Context, _ semaphore.Request, owner string) (<-chan struct{}, func(), error) {
	p := b.permitOf(owner, true)
	p.mu.Lock()
	p.waiting = true
	p.wake = waitq.NewWake()
	wake := p.wake
	p.mu.Unlock()
	return wake, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.waiting = false
		if !p.held {
			b.withdrawLocked(p, owner)
		}
	}, nil
}

// withdrawLocked deletes p's key and lease, if any, and forgets p. Call
// with p.mu held.
func (b *semBackend) withdrawLocked(p *permit, owner string) {
	p.stopWatch()
	if p.lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		_, _ = b.c.Revoke(ctx, p.lease) // deletes the key; else it expires
		cancel()
		p.lease = 0
	}
	b.forget(owner)
}

// TryAcquire implements semaphore.Backend.
func (b *semBackend) TryAcquire(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	p := b.permitOf(owner, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	token, err := b.attemptLocked(ctx, p, r, owner, ttl)
	if err != nil && !p.held && !p.waiting {
		// A try-once attempt, or one whose Acquire has given up: its key
		// must not stay in the queue.
		b.withdrawLocked(p, owner)
	}
	return token, 0, err
}

// maxRequeues bounds how often one attempt queues its permit's key again
// after finding it or its lease gone (expired, revoked or deleted by an
// operator) before it gives up with the last error.
const maxRequeues = 8

// errRequeue is what a step of an attempt returns when the permit's key or
// lease is gone: the attempt puts a new key, at the end of the queue.
var errRequeue = errors.New("etcdlock: the permit's key or lease is gone; queue again")

// attemptLocked makes one attempt for p: put its key (or read the queue, if
// it is queued), and hold if the counts before it leave room, else queue.
// Call with p.mu held.
func (b *semBackend) attemptLocked(ctx context.Context, p *permit, r semaphore.Request, owner string, ttl time.Duration) (uint64, error) {
	for range maxRequeues {
		token, err := b.tryLocked(ctx, p, r, owner, ttl)
		if !errors.Is(err, errRequeue) {
			return token, err
		}
		p.stopWatch()
		p.lease, p.queued = 0, false
	}
	return 0, errPermitNotHeld
}

// tryLocked is one round of attemptLocked; errRequeue asks for another.
func (b *semBackend) tryLocked(ctx context.Context, p *permit, r semaphore.Request, owner string, ttl time.Duration) (uint64, error) {
	kvs, rev, err := b.queueOf(ctx, p, r, owner, ttl)
	if err != nil {
		return 0, err
	}
	used, mine, err := countBefore(kvs, p.key, r)
	if err != nil {
		return 0, err
	}
	if mine < 0 {
		return 0, errRequeue
	}
	if used+r.Count > r.Permits {
		// Queued: watch the one key whose change may admit us.
		b.queueLocked(p, kvs, mine, r, rev, ttl)
		return 0, lock.ErrNotAcquired
	}
	if p.queued {
		if err := b.admitLocked(ctx, p, r, owner, mine+1 < len(kvs)); err != nil {
			return 0, err
		}
	}
	p.held = true
	return uint64(p.rev), nil
}

// queueOf returns the name's keys in queue order, with the revision they
// were read at: for a new permit, in the transaction that puts its key.
func (b *semBackend) queueOf(ctx context.Context, p *permit, r semaphore.Request, owner string, ttl time.Duration) ([]*mvccpb.KeyValue, int64, error) {
	prefix := b.namePrefix(r.Name)
	if p.lease == 0 {
		return b.putLocked(ctx, p, r, owner, ttl)
	}
	g, err := b.c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, 0, err
	}
	return g.Kvs, g.Header.Revision, nil
}

// putLocked puts p's key on a lease of a released permit, refreshed in
// parallel with the put, or on a new one, and reads the queue in the same
// transaction.
func (b *semBackend) putLocked(ctx context.Context, p *permit, r semaphore.Request, owner string, ttl time.Duration) ([]*mvccpb.KeyValue, int64, error) {
	prefix := b.namePrefix(r.Name)
	start := time.Now()
	refresh, err := b.leaseLocked(ctx, p, ttl, start)
	if err != nil {
		return nil, 0, err
	}
	p.key = prefix + fmt.Sprintf("%x", int64(p.lease))
	var resp *clientv3.TxnResponse
	err = alongside(func() (err error) {
		resp, err = b.c.Txn(ctx).Then(append([]clientv3.Op{
			clientv3.OpPut(p.key, value(r, owner), clientv3.WithLease(p.lease)),
			clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		}, modeOps(b.lockPrefix, r.Name, lock.ModeSemaphore)...)...).Commit()
		return err
	}, refresh)
	if refresh != nil && errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, 0, errRequeue // the kept lease expired meanwhile
	}
	if err != nil {
		return nil, 0, err
	}
	p.rev = resp.Responses[0].GetResponsePut().Header.Revision
	if me := modeOf(r.Name, lock.ModeSemaphore, resp.Responses); me != nil {
		return nil, 0, me // TryAcquire withdraws the key put
	}
	return resp.Responses[1].GetResponseRange().Kvs, resp.Header.Revision, nil
}

// leaseLocked gives p a lease of ttl: one granted now, or a released
// permit's, kept since, for which it returns the refresh to send alongside
// the put. The refresh records the TTL the server grants (0 if it fails).
func (b *semBackend) leaseLocked(ctx context.Context, p *permit, ttl time.Duration, start time.Time) (refresh func() error, err error) {
	p.secs = ttlSeconds(ttl)
	if il, ok := b.idle.take(p.secs, start); ok {
		p.lease = il.id
		return func() error {
			ka, err := b.c.KeepAliveOnce(ctx, il.id)
			p.granted = 0
			if err == nil {
				p.granted = time.Duration(ka.TTL) * time.Second
			}
			p.until = start.Add(p.granted)
			return err
		}, nil
	}
	g, err := b.c.Grant(ctx, p.secs)
	if err != nil {
		return nil, err
	}
	p.lease, p.granted = g.ID, time.Duration(g.TTL)*time.Second
	p.until = start.Add(p.granted)
	return nil, nil
}

// alongside runs side, if not nil, on a goroutine of its own while main
// runs (two calls to the server in the time of one), and returns once both
// have: main's error, else side's.
func alongside(main, side func() error) error {
	if side == nil {
		return main()
	}
	done := make(chan error, 1)
	go func() { done <- side() }()
	err := main()
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

// countBefore sums the permits the keys before key hold and returns where
// key is in kvs, -1 if it is gone. A key asking for another N is a
// *semaphore.MismatchError.
func countBefore(kvs []*mvccpb.KeyValue, key string, r semaphore.Request) (used, mine int, err error) {
	for i, kv := range kvs {
		n, k, _, ok := parseValue(kv.Value)
		if !ok {
			continue // not a permit's key: no part of the queue
		}
		if string(kv.Key) == key {
			return used, i, nil
		}
		if n != r.Permits {
			return 0, -1, &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: n}
		}
		used += k
	}
	return used, -1, nil
}

// admitLocked turns p, a queued key now admitted, into a held one. Its
// lease was kept alive while queued: it is refreshed so it lives a whole
// TTL from this attempt and, when a waiter queues behind (touch), the key,
// which that waiter watches, is touched so it looks again (both in
// parallel). A waiter that queues after this read sees this key admitted
// and watches no key. errRequeue if the lease or key is gone.
func (b *semBackend) admitLocked(ctx context.Context, p *permit, r semaphore.Request, owner string, touch bool) error {
	p.stopWatch()
	var touchKey func() error
	if touch {
		touchKey = func() error {
			resp, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(p.key), "=", p.rev)).
				Then(clientv3.OpPut(p.key, value(r, owner), clientv3.WithIgnoreLease())).Commit()
			if err == nil && !resp.Succeeded {
				err = errKeyGone
			}
			return err
		}
	}
	sent := time.Now()
	err := alongside(func() error {
		ka, err := b.c.KeepAliveOnce(ctx, p.lease)
		if err == nil {
			p.granted = time.Duration(ka.TTL) * time.Second
			p.until = sent.Add(p.granted)
		}
		return err
	}, touchKey)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, errKeyGone) {
		return errRequeue // expired or deleted while queued
	}
	return err
}

// stopWatch stops the watch and keep-alive of p's queued key, if any.
func (p *permit) stopWatch() {
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// queueLocked keeps p's key alive while it waits and watches, from after
// rev, the deletions under the name if every key before p's is admitted
// (p is the first waiter), else p's predecessor.
func (b *semBackend) queueLocked(p *permit, kvs []*mvccpb.KeyValue, mine int, r semaphore.Request, rev int64, ttl time.Duration) {
	p.stopWatch()
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.queued = true
	go b.keepQueued(ctx, p.lease, ttl)
	// Is every key before ours admitted? Then ours is the first waiter.
	sum, head := 0, true
	for _, kv := range kvs[:mine] {
		_, k, _, ok := parseValue(kv.Value)
		if !ok {
			continue
		}
		sum += k
		if sum > r.Permits {
			head = false
			break
		}
	}
	var wch clientv3.WatchChan
	if head {
		wch = b.c.Watch(clientv3.WithRequireLeader(ctx), b.namePrefix(r.Name), clientv3.WithPrefix(),
			clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	} else {
		wch = b.c.Watch(clientv3.WithRequireLeader(ctx), string(kvs[mine-1].Key), clientv3.WithRev(rev+1))
	}
	wake := p.wake
	go func() {
		select {
		case <-wch:
		case <-ctx.Done():
			return
		}
		wake.Signal() // nil, and so ignored, unless an Acquire waits
	}()
}

// keepQueued keeps a queued key's lease alive every third of its TTL until
// ctx is done.
func (b *semBackend) keepQueued(ctx context.Context, lease clientv3.LeaseID, ttl time.Duration) {
	t := time.NewTicker(max(ttl/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			kctx, cancel := context.WithTimeout(ctx, ttl/3)
			_, _ = b.c.KeepAliveOnce(kctx, lease)
			cancel()
		}
	}
}

// Renew implements semaphore.Backend: a keep-alive of the permit's lease,
// then a check that its key is still there.
func (b *semBackend) Renew(ctx context.Context, _ semaphore.Request, owner string, _ time.Duration) error {
	p := b.permitOf(owner, false)
	if p == nil {
		return errPermitNotHeld
	}
	p.mu.Lock()
	lease, key, rev, held := p.lease, p.key, p.rev, p.held
	p.mu.Unlock()
	if !held || lease == 0 {
		return errPermitNotHeld
	}
	sent := time.Now()
	ka, err := b.c.KeepAliveOnce(ctx, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return errPermitNotHeld
		}
		return err
	}
	p.mu.Lock()
	if p.lease == lease {
		p.granted = time.Duration(ka.TTL) * time.Second
		p.until = sent.Add(p.granted)
	}
	p.mu.Unlock()
	g, err := b.c.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != rev {
		return errPermitNotHeld
	}
	return nil
}

// Release implements semaphore.Backend: the key is deleted if it is still
// this permit's (compare-and-delete on its create revision), then its lease
// revoked.
func (b *semBackend) Release(ctx context.Context, _ semaphore.Request, owner string) error {
	p := b.permitOf(owner, false)
	if p == nil {
		return errPermitNotHeld
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease == 0 {
		b.forget(owner)
		return errPermitNotHeld
	}
	resp, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(p.key), "=", p.rev)).
		Then(clientv3.OpDelete(p.key)).Commit()
	if err != nil {
		return err
	}
	p.held = false
	p.stopWatch()
	// The key is gone: its lease holds nothing. It is kept for the next
	// permit of this TTL, or revoked in the background (if that fails, the
	// lease expires by itself).
	lease := p.lease
	kept := resp.Succeeded && b.idle.put(p.secs, idleLease{id: lease, granted: p.granted, until: p.until})
	p.lease = 0
	b.forget(owner)
	if !kept {
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			_, _ = b.c.Revoke(rctx, lease)
		}()
	}
	if !resp.Succeeded {
		return errPermitNotHeld
	}
	return nil
}

// Close revokes the kept leases that may still live, within 5 s, and stops
// keeping more. Held permits stay renewed until released.
func (b *semBackend) Close() error {
	_ = b.idle.close(b.c)
	return nil
}

// InspectSemaphore implements semaphore.Inspector: one read of the name's
// keys, and one lease lookup per holder for its time left.
func (b *semBackend) InspectSemaphore(ctx context.Context, name string) (semaphore.Info, error) {
	info := semaphore.Info{Name: name}
	g, err := b.c.Get(ctx, b.namePrefix(name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return info, fmt.Errorf("etcdlock: %w", err)
	}
	for _, kv := range g.Kvs {
		n, k, owner, ok := parseValue(kv.Value)
		if !ok {
			continue
		}
		if info.Permits == 0 {
			info.Permits = n
		}
		if info.Waiting || info.Used+k > n {
			// Not admitted: neither is anyone after it (arrival order).
			info.Waiting = true
			continue
		}
		info.Used += k
		_, label, _ := lock.ParseOwner(owner)
		h := semaphore.HolderInfo{Holder: label, Entry: string(kv.Key), Token: uint64(kv.CreateRevision), Count: k, TimeLeft: lock.Unknown}
		if lc, ok := b.c.(interface {
			TimeToLive(context.Context, clientv3.LeaseID, ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error)
		}); ok && kv.Lease != 0 {
			if ttl, err := lc.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL >= 0 {
				h.TimeLeft = time.Duration(ttl.TTL) * time.Second
			}
		}
		info.Holders = append(info.Holders, h)
		if uint64(kv.CreateRevision) > info.LastToken {
			info.LastToken = uint64(kv.CreateRevision)
		}
	}
	return info, nil
}
