package etcdlock

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

var (
	_ rwlock.Lister     = (*rwBackend)(nil)
	_ rwlock.Breaker    = (*rwBackend)(nil)
	_ semaphore.Lister  = (*semBackend)(nil)
	_ semaphore.Breaker = (*semBackend)(nil)
)

// Bounds of one listing's page: keys read per request, and requests and
// time per page.
const (
	listBatch       = 500
	maxGetsPerPage  = 8
	maxListPageTime = time.Second
)

// listNames reads the keys under root+prefix in key order, 500 per request
// and at most 8 requests or a second per page, and returns the distinct
// names nameOf finds in them (nameOf gets a key without root), at most
// limit, and the cursor of the next page: the last key read, "" when the
// listing is complete. A name whose keys are not adjacent (a nested name's
// keys between them) may be listed on two pages.
func listNames(ctx context.Context, c Client, root, prefix string, limit int, cursor string, nameOf func(rel string) (string, bool)) ([]string, string, error) {
	from := root + prefix
	end := clientv3.GetPrefixRangeEnd(from)
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !strings.HasPrefix(string(raw), root+prefix) {
			return nil, "", fmt.Errorf("%w: etcdlock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
		}
		from = string(raw) + "\x00"
	}
	if from == "" {
		from = "\x00" // every key: etcd refuses an empty one
	}
	var names []string
	seen := map[string]bool{}
	begin, last := time.Now(), ""
	for gets := 0; gets < maxGetsPerPage && time.Since(begin) < maxListPageTime; gets++ {
		g, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(listBatch))
		if err != nil {
			return nil, "", fmt.Errorf("etcdlock: %w", err)
		}
		for _, kv := range g.Kvs {
			k := string(kv.Key)
			if name, ok := nameOf(k[len(root):]); ok && !seen[name] {
				if len(names) == limit {
					return names, base64.RawURLEncoding.EncodeToString([]byte(last)), nil
				}
				seen[name] = true
				names = append(names, name)
			}
			last = k
		}
		if !g.More {
			return names, "", nil
		}
		from = last + "\x00"
	}
	return names, base64.RawURLEncoding.EncodeToString([]byte(last)), nil
}

// parentOf returns the name whose key is rel, <name>/<last part>, or false
// for a key without a name: a semaphore's, and the start of a lock's or a
// read-write lock's.
func parentOf(rel string) (string, bool) {
	i := strings.LastIndexByte(rel, '/')
	return rel[:max(i, 0)], i > 0
}

// lockName returns the name of the lock whose contender's key is rel
// (<name>/<lease ID in hex>), or false for a key of another kind: a
// read-write lock's (<name>/read/… or <name>/write/…) or a semaphore's
// under the Locker's prefix and DefaultSemaphorePrefix. A
// lock whose own name ends in "/read" or "/write" is therefore not listed
// (InspectLock still shows it).
func (b *backend) lockName(rel string) (string, bool) {
	name, ok := parentOf(rel)
	if _, rw := rwName(rel); !ok || rw || strings.HasPrefix(rel, DefaultSemaphorePrefix) {
		return "", false
	}
	return name, true
}

// rwName returns the name of the read-write lock whose key is rel
// (<name>/read/<lease> or <name>/write/<lease>), or false.
func rwName(rel string) (string, bool) {
	dir, _ := parentOf(rel)
	for _, kind := range []string{"/read", "/write"} {
		if name, ok := strings.CutSuffix(dir, kind); ok && name != "" {
			return name, true
		}
	}
	return "", false
}

// ListRW implements rwlock.Lister: the names of the readers' and writers'
// keys under the prefix, read as ListLocks reads a lock's.
func (b *rwBackend) ListRW(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return listNames(ctx, b.c, b.prefix, prefix, limit, cursor, rwName)
}

// BreakRW implements rwlock.Breaker: it deletes the holder's key if it is
// still the one inspected (same create revision). The waiters, watching
// the name's deletions, try again; the holder's lease is left to its owner,
// whose renewal finds the key gone.
func (b *rwBackend) BreakRW(ctx context.Context, name string, token uint64) (rwlock.Holder, bool, error) {
	h, writer, err := rwlock.HolderOf(ctx, b, name, token)
	if err != nil {
		return h, writer, err
	}
	g, err := b.c.Get(ctx, b.dir(name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMinCreateRev(int64(token)), clientv3.WithMaxCreateRev(int64(token)))
	if err != nil {
		return h, writer, fmt.Errorf("etcdlock: %w", err)
	}
	if len(g.Kvs) == 0 {
		return h, writer, lockerr.NotHeld(fmt.Sprintf("etcdlock: the holder of %q with token %d left while being broken", name, token))
	}
	return h, writer, deleteIfSame(ctx, b.c, string(g.Kvs[0].Key), int64(token))
}

// deleteIfSame deletes key if its create revision is still rev.
func deleteIfSame(ctx context.Context, c Client, key string, rev int64) error {
	r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return fmt.Errorf("etcdlock: %w", err)
	}
	if !r.Succeeded {
		return lockerr.NotHeld(fmt.Sprintf("etcdlock: %q changed hands while being broken", key))
	}
	return nil
}

// ListSemaphores implements semaphore.Lister: the names of the
// acquisitions' keys (<prefix><name>/<lease ID in hex>) under the prefix.
func (b *semBackend) ListSemaphores(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return listNames(ctx, b.c, b.prefix, prefix, limit, cursor, parentOf)
}

// BreakPermits implements semaphore.Breaker: it deletes the holder's key if
// it is still the one inspected (same create revision). The first waiter,
// watching the name's deletions, is admitted; the holder's renewal finds
// its key gone.
func (b *semBackend) BreakPermits(ctx context.Context, name string, token uint64) (semaphore.HolderInfo, error) {
	info, err := b.InspectSemaphore(ctx, name)
	if err != nil {
		return semaphore.HolderInfo{}, err
	}
	for _, h := range info.Holders {
		if h.Token == token {
			return h, deleteIfSame(ctx, b.c, h.Entry, int64(token))
		}
	}
	return semaphore.HolderInfo{}, lockerr.NotHeld(fmt.Sprintf("etcdlock: no holder of semaphore %q has token %d", name, token))
}
