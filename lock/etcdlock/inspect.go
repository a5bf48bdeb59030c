package etcdlock

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// InspectLock implements lock.Inspector. Every contender on the name counts,
// latchkey's or not (etcdctl lock, concurrency.Mutex): the holder is the key
// with the lowest create revision under <prefix>key/, Waiters the others.
// Entry is the holder's etcd key, TimeLeft its lease's remaining TTL in
// whole seconds (lock.Unknown with a Client that cannot ask for it). etcd
// records no acquisition time.
func (l *Locker) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, _, err := l.b.inspect(ctx, key)
	return info, err
}

func (b *backend) inspect(ctx context.Context, name string) (lock.LockInfo, *mvccpb.KeyValue, error) {
	info := lock.LockInfo{Key: name}
	// A lock's keys are <name>/<lease ID in lowercase hex>, as modeOps
	// counts them: not a read-write lock's <name>/read/… or /write/….
	dir := b.prefix + name + "/"
	g, err := b.c.Get(ctx, dir+"0", clientv3.WithRange(dir+"g"),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return info, nil, fmt.Errorf("etcdlock: %w", err)
	}
	if len(g.Kvs) == 0 {
		return info, nil, nil
	}
	kv := g.Kvs[0]
	info.Held, info.Holder, info.Entry, info.Token = true, string(kv.Value), string(kv.Key), uint64(kv.CreateRevision)
	info.Waiters = int(g.Count) - 1
	info.Waiting = info.Waiters > 0
	info.TimeLeft = lock.Unknown
	type leases interface {
		TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error)
	}
	if lc, ok := b.c.(leases); ok && kv.Lease != 0 {
		ttl, err := lc.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return info, nil, fmt.Errorf("etcdlock: %w", err)
		}
		if ttl.TTL >= 0 {
			info.TimeLeft = time.Duration(ttl.TTL) * time.Second
		}
	}
	return info, kv, nil
}

// ListLocks implements lock.Lister: it reads the contenders' keys under the
// prefix in key order, 500 per request and at most 8 requests or a second
// per page, and inspects each lock name found. The cursor is the last key
// read. A name whose contenders' keys are not adjacent (a nested name's
// keys between them) may be listed on two pages. Keys of read-write locks
// and semaphores under the prefix are not locks and are left out.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	names, next, err := listNames(ctx, l.b.c, l.b.prefix, prefix, limit, cursor, l.b.lockName)
	if err != nil {
		return lock.LockPage{}, err
	}
	page := lock.LockPage{Cursor: next}
	for _, n := range names {
		info, _, err := l.b.inspect(ctx, n)
		if err != nil {
			return lock.LockPage{}, err
		}
		if info.Held {
			page.Locks = append(page.Locks, info)
		}
	}
	return page, nil
}

// BreakLock implements lock.Breaker: it deletes the holder's key if it is
// still the one inspected (same create revision), whoever wrote it. The next
// contender, watching that key, takes the lock; the holder's lease is left
// to its owner, whose renewal finds the key gone.
func (l *Locker) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, kv, err := l.b.inspect(ctx, key)
	if err != nil {
		return info, err
	}
	if !info.Held {
		return info, fmt.Errorf("%w: etcdlock: %q is not held", lock.ErrNotHeld, key)
	}
	k := string(kv.Key)
	resp, err := l.b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision)).
		Then(clientv3.OpDelete(k)).
		Commit()
	if err != nil {
		return info, fmt.Errorf("etcdlock: %w", err)
	}
	if !resp.Succeeded {
		return info, fmt.Errorf("%w: etcdlock: %q changed hands while being broken", lock.ErrNotHeld, key)
	}
	return info, nil
}
