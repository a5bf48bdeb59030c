package redlock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	_ lock.Inspector = (*Locker)(nil)
	_ lock.Lister    = (*Locker)(nil)
	_ lock.Breaker   = (*Locker)(nil)
)

// inspectTimeout bounds each node's answer to an operator's call.
const inspectTimeout = 2 * time.Second

// InspectLock implements lock.Inspector with the quorum's view: every node
// is asked (as redislock asks one), and the lock is held if a quorum of
// nodes hold it. Then Holder is the label most of them report, Token the
// quorum-th smallest of their fencing counters (the holder's token, once its
// write-back is done: see the package doc), TimeLeft the shortest of their
// leases, and Waiting whether any node saw a failed attempt lately; Waiters
// is lock.Unknown. Nodes that do not answer count as not holding; if so
// many fail that no quorum could answer, InspectLock returns the first
// failure.
func (l *Locker) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	view, _, err := l.b.inspect(ctx, key)
	return view, err
}

// inspect asks every node about key and returns the quorum's view and each
// node's answer (the zero LockInfo where a node failed).
func (b *backend) inspect(ctx context.Context, key string) (lock.LockInfo, []lock.LockInfo, error) {
	infos, errs := eachNode(ctx, b, inspectTimeout, func(ctx context.Context, i int) (lock.LockInfo, error) {
		return b.nodes[i].InspectLock(ctx, key)
	})
	view, err := b.quorumView(key, infos, errs)
	return view, infos, err
}

// ListLocks implements lock.Lister. A lock held on a quorum is on at least
// one of the first N-Q+1 nodes, so those are listed one after the other (as
// redislock lists one), and each key found is inspected on every node: it is
// listed if a quorum holds it and the node listed is the first of them that
// does, so each lock appears once (as with SCAN, a lock taken or let go
// meanwhile may or may not). The cursor names the node and that node's
// cursor.
func (l *Locker) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	b := l.b
	scanned := len(b.nodes) - b.quorum + 1
	node, inner, err := parseListCursor(cursor, scanned)
	if err != nil {
		return lock.LockPage{}, err
	}
	var page lock.LockPage
	for ; node < scanned; node, inner = node+1, "" {
		lctx, cancel := context.WithTimeout(ctx, inspectTimeout)
		found, err := b.nodes[node].ListLocks(lctx, prefix, limit-len(page.Locks), inner)
		cancel()
		if err != nil {
			return lock.LockPage{}, fmt.Errorf("redlock: node %d: %w", node, err)
		}
		for _, f := range found.Locks {
			view, infos, err := b.inspect(ctx, f.Key)
			if err != nil {
				return lock.LockPage{}, err
			}
			if view.Held && slices.IndexFunc(infos[:scanned], func(in lock.LockInfo) bool { return in.Held }) == node {
				page.Locks = append(page.Locks, view)
			}
		}
		if found.Cursor != "" {
			page.Cursor = listCursor(node, found.Cursor)
			break
		}
		if len(page.Locks) == limit && node+1 < scanned {
			page.Cursor = listCursor(node+1, "")
			break
		}
	}
	return page, nil
}

// listCursor and parseListCursor write and read ListLocks' cursor: the
// node's index, a colon, and that node's cursor, in URL-safe base64.
func listCursor(node int, inner string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(node) + ":" + inner))
}

func parseListCursor(cursor string, nodes int) (node int, inner string, err error) {
	if cursor == "" {
		return 0, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	i, rest, ok := strings.Cut(string(raw), ":")
	if err == nil && ok {
		node, err = strconv.Atoi(i)
	}
	if err != nil || !ok || node < 0 || node >= nodes {
		return 0, "", fmt.Errorf("%w: redlock: %q is not a cursor of this listing", lock.ErrInvalid, cursor)
	}
	return node, rest, nil
}

// quorumView folds the nodes' answers for key into one, as InspectLock says.
func (b *backend) quorumView(key string, infos []lock.LockInfo, errs []error) (lock.LockInfo, error) {
	view := lock.LockInfo{Key: key, Waiters: lock.Unknown, TimeLeft: lock.Unknown}
	var (
		answered int
		tokens   []uint64
		labels   = map[string]int{}
		first    error
	)
	for i, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		answered++
		in := infos[i]
		view.Waiting = view.Waiting || in.Waiting
		if !in.Held {
			continue
		}
		tokens = append(tokens, in.Token)
		labels[in.Holder]++
		if view.TimeLeft == lock.Unknown || in.TimeLeft < view.TimeLeft {
			view.TimeLeft = in.TimeLeft
		}
	}
	if answered < b.quorum {
		return lock.LockInfo{Key: key}, fmt.Errorf("redlock: %d of %d nodes answered, quorum is %d: %w", answered, len(b.nodes), b.quorum, first)
	}
	if len(tokens) < b.quorum {
		return lock.LockInfo{Key: key, Waiters: lock.Unknown, Waiting: view.Waiting}, nil
	}
	slices.Sort(tokens)
	view.Held, view.Token = true, tokens[b.quorum-1]
	for label, n := range labels {
		if n > labels[view.Holder] || n == labels[view.Holder] && label < view.Holder {
			view.Holder = label
		}
	}
	view.Entry = fmt.Sprintf("held on %d of %d nodes", len(tokens), len(b.nodes))
	return view, nil
}

// BreakLock implements lock.Breaker: the lock is broken on every node that
// holds it (each keeps its fencing counter and publishes the release, as
// redislock's break does), so the next holder's token is higher than the
// broken one's. It reports the quorum's view from before the break, and
// lock.ErrNotHeld when no quorum held the lock; a node holding it alone is
// still cleared then.
func (l *Locker) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	infos, errs := eachNode(ctx, l.b, inspectTimeout, func(ctx context.Context, i int) (lock.LockInfo, error) {
		info, err := l.b.nodes[i].BreakLock(ctx, key)
		if errors.Is(err, lock.ErrNotHeld) {
			err = nil // info says it was free
		}
		return info, err
	})
	view, err := l.b.quorumView(key, infos, errs)
	if err != nil {
		return view, err
	}
	if !view.Held {
		return view, fmt.Errorf("%w: redlock: %q is not held by a quorum", lock.ErrNotHeld, key)
	}
	return view, nil
}
