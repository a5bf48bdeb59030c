package etcdlock

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
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

// Bounds of one ListLocks page: keys read per request, and requests per page.
const (
	listBatch       = 500
	maxGetsPerPage  = 8
	maxListPageTime = time.Second
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
	g, err := b.c.Get(ctx, b.prefix+name+"/", clientv3.WithFirstCreate()...)
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
// keys between them) may be listed on two pages.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	root := l.b.prefix + prefix
	end := clientv3.GetPrefixRangeEnd(root)
	from := root
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !strings.HasPrefix(string(raw), root) {
			return lock.LockPage{}, fmt.Errorf("%w: etcdlock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
		}
		from = string(raw) + "\x00"
	}
	var names []string
	seen := map[string]bool{}
	begin, last, done := time.Now(), "", false
read:
	for gets := 0; gets < maxGetsPerPage && time.Since(begin) < maxListPageTime; gets++ {
		g, err := l.b.c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(listBatch))
		if err != nil {
			return lock.LockPage{}, fmt.Errorf("etcdlock: %w", err)
		}
		for _, kv := range g.Kvs {
			k := string(kv.Key)
			i := strings.LastIndexByte(k, '/')
			if i <= len(l.b.prefix) {
				last = k
				continue // not a contender's key
			}
			name := k[len(l.b.prefix):i]
			if !seen[name] {
				if len(names) == limit {
					break read
				}
				seen[name] = true
				names = append(names, name)
			}
			last = k
		}
		if !g.More {
			done = true
			break
		}
		from = last + "\x00"
	}
	var page lock.LockPage
	if !done {
		page.Cursor = base64.RawURLEncoding.EncodeToString([]byte(last))
	}
	for _, n := range names {
		if n == "" {
			continue
		}
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
