package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// NewRW returns a read-write Locker (package rwlock) on the etcd cluster c
// talks to, in the key layout of etcd's recipe.RWMutex
// (client/v3/experimental/recipes), so that it and this Locker exclude each
// other on the same name: under <prefix><name>/, a reader writes
// read/<lease ID in hex> and a writer write/<lease ID in hex>, each on an
// etcd lease of its own. A reader holds once no write key with a lower
// create revision is left; a writer once no key at all with a lower one is.
//
// The recipe's leases are its session's; here each key has its own, renewed
// by the lock.Manager's watchdog (a keep-alive and a read that the key is
// still ours), so a holder learns of its loss from Done, and a key's token is
// its create revision: cluster-wide, never reused, so a writer's token is
// above every earlier holder's and a reader's above the writers' before it.
//
// A waiting writer's intent is its queued key, as in the recipe: readers
// that come after it wait behind it. Its lease lives max(TTL, IntentTTL)
// and each attempt renews it, so the key of a writer that dies while it
// waits goes with its lease. A reader does not queue: an attempt that finds
// a writer ahead deletes its key again (a recipe reader keeps its place).
//
// It returns an error wrapping lock.ErrInvalid for a nil client and touches
// no server until the first acquisition. Close revokes the leases of keys
// still queued.
func NewRW(c Client, opts ...Option) (*rwlock.Locker, error) {
	o, err := configure(c, opts)
	if err != nil {
		return nil, err
	}
	return rwlock.New(&rwBackend{c: c, prefix: o.prefix, keys: make(map[string]*rwKey)})
}

// rwBackend is rwlock.Backend on etcd.
type rwBackend struct {
	c      Client
	prefix string

	mu   sync.Mutex
	keys map[string]*rwKey // by owner: held or queued keys; guarded by mu
}

// rwKey is an owner's key on the server.
type rwKey struct {
	key   string
	lease clientv3.LeaseID
	rev   int64 // create revision: the token
	held  bool
}

var (
	_ rwlock.Backend        = (*rwBackend)(nil)
	_ rwlock.ReleaseWatcher = (*rwBackend)(nil)
	_ rwlock.Inspector      = (*rwBackend)(nil)
)

var errRWNotHeld = lockerr.NotHeld("etcdlock: the lock expired or was deleted")

// dir is name's prefix, under which its readers and writers write.
func (b *rwBackend) dir(name string) string { return b.prefix + name + "/" }

func (b *rwBackend) TryAcquire(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	b.mu.Lock()
	k := b.keys[owner]
	b.mu.Unlock()
	if k != nil && k.held {
		return 0, 0, fmt.Errorf("etcdlock: owner already holds %q", name)
	}
	if k != nil {
		// A queued writer: its lease counts the TTL again from now, before
		// the attempt, as a fresh grant would.
		if err := b.keepAlive(ctx, k.lease); err != nil {
			if !errors.Is(err, lock.ErrNotHeld) {
				return 0, 0, err // still queued: Withdraw or Release deletes it
			}
			b.forget(owner)
			k = nil // its key went with its lease: queue again
		}
	}
	if k == nil {
		var err error
		if k, err = b.create(ctx, name, owner, mode, ttl, intent); err != nil {
			return 0, 0, err
		}
	}
	ahead := b.dir(name)
	if mode == rwlock.Read {
		ahead += "write"
	}
	// Not WithCountOnly: the server counts before it filters by revision.
	g, err := b.c.Get(ctx, ahead, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(k.rev-1), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil {
		b.drop(ctx, owner, k)
		return 0, 0, fmt.Errorf("etcdlock: %w", err)
	}
	if len(g.Kvs) == 0 {
		b.mu.Lock()
		k.held = true
		b.keys[owner] = k
		b.mu.Unlock()
		return uint64(k.rev), 0, nil
	}
	if mode == rwlock.Write && intent {
		b.mu.Lock()
		b.keys[owner] = k // keep its place
		b.mu.Unlock()
		return 0, 0, lock.ErrNotAcquired
	}
	b.drop(ctx, owner, k)
	return 0, 0, lock.ErrNotAcquired
}

// create grants a lease and puts owner's key on it.
func (b *rwBackend) create(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (*rwKey, error) {
	if intent {
		ttl = max(ttl, rwlock.IntentTTL)
	}
	g, err := b.c.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	kind := "read/"
	if mode == rwlock.Write {
		kind = "write/"
	}
	key := b.dir(name) + kind + fmt.Sprintf("%x", int64(g.ID))
	r, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(g.ID))}, modeOps(b.prefix, name, lock.ModeReadWrite)...)...).Commit()
	if err == nil && !r.Succeeded {
		err = errors.New("key exists")
	}
	if err == nil {
		if me := modeOf(name, lock.ModeReadWrite, r.Responses); me != nil {
			b.revoke(ctx, g.ID) // deletes the key put
			return nil, me
		}
	}
	if err != nil {
		b.revoke(ctx, g.ID)
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	return &rwKey{key: key, lease: g.ID, rev: r.Header.Revision}, nil
}

// keepAlive renews lease; an error wrapping lock.ErrNotHeld means it is
// gone.
func (b *rwBackend) keepAlive(ctx context.Context, id clientv3.LeaseID) error {
	r, err := b.c.KeepAliveOnce(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return errRWNotHeld
	case err != nil:
		return fmt.Errorf("etcdlock: %w", err)
	case r.TTL <= 0:
		return errRWNotHeld
	}
	return nil
}

// forget removes owner's key from the map.
func (b *rwBackend) forget(owner string) *rwKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.keys[owner]
	delete(b.keys, owner)
	return k
}

// drop deletes k from the server (revoking its lease deletes it) and from
// the map.
func (b *rwBackend) drop(ctx context.Context, owner string, k *rwKey) {
	b.mu.Lock()
	if b.keys[owner] == k {
		delete(b.keys, owner)
	}
	b.mu.Unlock()
	b.revoke(ctx, k.lease)
}

// revoke revokes a lease no key of ours needs, on a bounded context that
// outlives ctx; if it fails, the lease expires after its TTL.
func (b *rwBackend) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = b.c.Revoke(rctx, id)
}

func (b *rwBackend) Renew(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration) error {
	b.mu.Lock()
	k := b.keys[owner]
	b.mu.Unlock()
	if k == nil || !k.held {
		return errRWNotHeld
	}
	if err := b.keepAlive(ctx, k.lease); err != nil {
		return err
	}
	// The key may have been deleted behind our back (an operator).
	g, err := b.c.Get(ctx, k.key, clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("etcdlock: %w", err)
	}
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != k.rev {
		return errRWNotHeld
	}
	return nil
}

func (b *rwBackend) Release(ctx context.Context, name, owner string, mode rwlock.Mode) error {
	k := b.forget(owner)
	if k == nil {
		return errRWNotHeld
	}
	r, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", k.rev)).
		Then(clientv3.OpDelete(k.key)).Commit()
	b.revoke(ctx, k.lease)
	if err != nil {
		return fmt.Errorf("etcdlock: %w", err)
	}
	if !r.Succeeded || !k.held {
		return errRWNotHeld
	}
	return nil
}

func (b *rwBackend) Withdraw(ctx context.Context, name, owner string) error {
	b.mu.Lock()
	k := b.keys[owner]
	if k != nil && !k.held {
		delete(b.keys, owner)
	} else {
		k = nil
	}
	b.mu.Unlock()
	if k != nil {
		b.revoke(ctx, k.lease)
	}
	return nil
}

// WatchRelease watches name's keys for deletions, from now on: a watch
// from a past revision would be served every 100 ms (see waitDelete).
func (b *rwBackend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wch := b.c.Watch(clientv3.WithRequireLeader(wctx), b.dir(name), clientv3.WithPrefix(), clientv3.WithCreatedNotify(),
		clientv3.WithFilterPut())
	// Wait for the watch to be in place, so no release after this returns
	// goes unseen.
	select {
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil {
			cancel()
			return nil, nil, fmt.Errorf("etcdlock: watch %q did not start", name)
		}
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
	wake := waitq.NewWake()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					wake.Signal()
					break
				}
			}
		}
	}()
	return wake, func() { cancel(); <-done }, nil
}

// leaseReader tells a lease's time left; *clientv3.Client is one.
type leaseReader interface {
	TimeToLive(context.Context, clientv3.LeaseID, ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error)
}

// InspectRW implements rwlock.Inspector: the keys in create-revision order
// tell the holders (readers before the first write key, or that key if it
// comes first) from the waiters. TimeLeft is the lease's, in whole seconds,
// or -1 if the Client cannot tell.
func (b *rwBackend) InspectRW(ctx context.Context, name string) (rwlock.Info, error) {
	var info rwlock.Info
	g, err := b.c.Get(ctx, b.dir(name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return info, fmt.Errorf("etcdlock: %w", err)
	}
	writerAhead := false
	for _, kv := range g.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), b.dir(name))
		h := rwlock.Holder{Label: string(kv.Value), Token: uint64(kv.CreateRevision), TimeLeft: lock.Unknown}
		if kv.Lease != 0 {
			if ttl, ok := b.c.(leaseReader); ok {
				if r, err := ttl.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
					h.TimeLeft = time.Duration(r.TTL) * time.Second
				}
			}
		}
		info.Token = max(info.Token, uint64(kv.CreateRevision))
		switch {
		case strings.HasPrefix(rest, "write"):
			if info.Writer == nil && !writerAhead && len(info.Readers) == 0 {
				info.Writer = &h
			} else {
				info.WritersWaiting++
			}
			writerAhead = true
		case strings.HasPrefix(rest, "read") && !writerAhead:
			info.Readers = append(info.Readers, h)
		}
	}
	return info, nil
}
