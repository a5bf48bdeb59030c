package zklock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// Bounds of one ListLocks page: locks inspected, and time.
const (
	maxInspectsPerPage = 2 * lock.MaxListLimit
	maxListPageTime    = time.Second
)

// InspectLock implements lock.Inspector. Every contender under the lock's
// znode counts, latchkey's or not (Curator, kazoo): the holder is the one
// with the lowest sequence number, Waiters the others. Entry is the
// holder's node path, Holder its data (our label, Curator's IP address,
// kazoo's identifier), AcquiredAt the node's creation time by the server's
// clock. TimeLeft is lock.Unknown: the node lives as long as its session.
func (l *Locker) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, _, err := l.b.inspect(ctx, key)
	return info, err
}

// inspect returns key's lock and its holder node's version. A holder that
// leaves while it is read is read again, a few times.
func (b *backend) inspect(ctx context.Context, key string) (lock.LockInfo, int32, error) {
	info := lock.LockInfo{Key: key}
	dir, err := b.dir(key)
	if err != nil {
		return info, 0, err
	}
	for range 5 {
		children, err := call(ctx, b, func() ([]string, error) {
			ch, _, err := b.conn.Children(dir)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return info, 0, nil
		}
		if err != nil {
			return info, 0, fmt.Errorf("zklock: %w", err)
		}
		head, n := "", 0
		var best int64 = -1
		for _, ch := range children {
			if strings.Contains(ch, readNode) {
				return info, 0, nil // readers: a read-write lock's (rwlock.Inspect shows it)
			}
			if s, ok := sequence(ch); ok {
				n++
				if best < 0 || s < best {
					best, head = s, ch
				}
			}
		}
		if head == "" {
			return info, 0, nil
		}
		type node struct {
			data []byte
			st   *zk.Stat
		}
		got, err := call(ctx, b, func() (node, error) {
			data, st, err := b.conn.Get(dir + "/" + head)
			return node{data, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: read the queue again
		}
		if err != nil {
			return info, 0, fmt.Errorf("zklock: %w", err)
		}
		info.Held, info.Holder, info.Entry, info.Token = true, string(got.data), dir+"/"+head, uint64(got.st.Czxid)
		info.AcquiredAt = time.UnixMilli(got.st.Ctime)
		info.TimeLeft, info.Waiters = lock.Unknown, n-1
		info.Waiting = n > 1
		return info, got.st.Version, nil
	}
	return info, 0, fmt.Errorf("zklock: %q changed hands five times while being read", key)
}

// ListLocks implements lock.Lister on the children of one znode: the
// prefix's part before its last "/" names it (the Locker's prefix itself if
// there is none), so a listing does not descend into nested names. Up to
// 2000 names are inspected per page, for at most a second; the cursor is
// the last name inspected. A semaphore's own lock (<name>-__lock__) is not
// listed.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	var page lock.LockPage
	next, err := l.b.eachName(ctx, prefix, limit, cursor, func(name string) (bool, error) {
		if strings.HasSuffix(name, semLockSuffix) {
			return false, nil
		}
		info, _, err := l.b.inspect(ctx, name)
		if info.Held {
			page.Locks = append(page.Locks, info)
		}
		return info.Held, err
	})
	page.Cursor = next
	return page, err
}

// eachName calls keep, in name order, for the names under the znode that
// prefix's part before its last "/" names (the Locker's prefix itself if
// there is none) that start with prefix and come after cursor's, until keep
// has kept limit of them, 2000 were looked at or a second has passed. It
// returns the cursor of the next page: the last name looked at, "" when
// there are no more.
func (b *backend) eachName(ctx context.Context, prefix string, limit int, cursor string, keep func(name string) (bool, error)) (string, error) {
	parent, start := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		parent, start = prefix[:i+1], prefix[i+1:]
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	after := string(raw)
	if err != nil || after != "" && !strings.HasPrefix(after, prefix) {
		return "", fmt.Errorf("%w: zklock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
	}
	dir := b.prefix
	if parent != "" {
		if dir, err = b.dir(strings.TrimSuffix(parent, "/")); err != nil {
			return "", err
		}
	}
	if dir == "" {
		dir = "/"
	}
	children, err := call(ctx, b, func() ([]string, error) {
		ch, _, err := b.conn.Children(dir)
		return ch, err
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", fmt.Errorf("zklock: %w", err)
	}
	var names []string
	for _, c := range children {
		if name := parent + c; strings.HasPrefix(c, start) && name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	begin, kept := time.Now(), 0
	for i, name := range names {
		if kept == limit || i == maxInspectsPerPage || time.Since(begin) > maxListPageTime {
			return base64.RawURLEncoding.EncodeToString([]byte(names[i-1])), nil
		}
		ok, err := keep(name)
		if err != nil {
			return "", err
		}
		if ok {
			kept++
		}
	}
	return "", nil
}

// BreakLock implements lock.Breaker: a version-checked delete of the
// holder's node, whoever created it. The next contender, watching it, takes
// the lock; the holder's session lives on, and its renewal finds the node
// gone.
func (l *Locker) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, version, err := l.b.inspect(ctx, key)
	if err != nil {
		return info, err
	}
	if !info.Held {
		return info, fmt.Errorf("%w: zklock: %q is not held", lock.ErrNotHeld, key)
	}
	err = l.b.deleteNode(ctx, info.Entry, version)
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return info, fmt.Errorf("%w: zklock: %q changed hands while being broken", lock.ErrNotHeld, key)
	case err != nil:
		return info, fmt.Errorf("zklock: %w", err)
	}
	return info, nil
}
