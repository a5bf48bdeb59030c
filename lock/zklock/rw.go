package zklock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// NewRW connects as New does and returns a read-write Locker (package
// rwlock) in the node layout of Python kazoo's ReadLock and WriteLock, so
// that kazoo and this Locker exclude each other on the same path: under
// <prefix>/<name>, a reader creates the EPHEMERAL_SEQUENTIAL child
// <uuid hex>__rlock__<seq>, a writer <uuid hex>__lock__<seq>. A reader holds
// once no writer is ahead of it in sequence order; a writer once nobody is.
// Every other contender this package recognises (Curator's and kazoo's
// Lock, zklock's own Locker) counts as a writer. WithNodeNames does not
// apply: Curator's InterProcessReadWriteLock sorts its nodes its own way.
//
// A waiting writer's intent is its queued node, as in kazoo: readers that
// come after it wait behind it; the node goes with the session if its
// holder dies. A reader does not queue: an attempt that finds a writer
// ahead deletes its node again (a kazoo reader keeps its place). Tokens are
// the nodes' czxids. Sessions and TTLs work as for New's Locker.
func NewRW(ctx context.Context, servers []string, opts ...Option) (*rwlock.Locker, error) {
	l, err := New(ctx, servers, opts...)
	if err != nil {
		return nil, err
	}
	return rwlock.New(&rwBackend{l: l, b: l.b, nodes: make(map[string]*rwNode)})
}

// rwBackend is rwlock.Backend on ZooKeeper.
type rwBackend struct {
	l *Locker // owns the session; Close ends it
	b *backend

	mu    sync.Mutex
	nodes map[string]*rwNode // by owner: held or queued nodes; guarded by mu
}

// rwNode is an owner's node.
type rwNode struct {
	dir, path, guid string
	czxid           int64
	version         int32
	held            bool
}

var (
	_ rwlock.Backend        = (*rwBackend)(nil)
	_ rwlock.ReleaseWatcher = (*rwBackend)(nil)
	_ rwlock.Inspector      = (*rwBackend)(nil)
	_ rwlock.Bounded        = (*rwBackend)(nil)
)

// Close ends the session: the server deletes every node of this Locker.
func (rw *rwBackend) Close() error { return rw.l.Close() }

// The node names of kazoo's ReadLock and WriteLock, before the sequence.
const (
	readNode  = "__rlock__"
	writeNode = "__lock__"
)

// placeOf reports whether ours, a node of mode, is among children, and
// whether a node before it blocks it: any earlier node blocks a writer,
// an earlier writer blocks a reader.
func placeOf(children []string, ours string, mode rwlock.Mode) (found, blocked bool) {
	mine, _ := sequence(ours)
	for _, ch := range children {
		if ch == ours {
			found = true
			continue
		}
		seq, ok := sequence(ch)
		if ok && seq < mine && (mode == rwlock.Write || !isReader(ch)) {
			blocked = true
		}
	}
	return found, blocked
}

// isReader reports whether a contender's node is a reader's.
func isReader(name string) bool {
	return strings.HasSuffix(name[:len(name)-10], readNode)
}

func (rw *rwBackend) TryAcquire(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	b := rw.b
	dir, err := b.dir(name)
	if err != nil {
		return 0, 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, 0, err
	}
	b.sweep(ctx)
	rw.mu.Lock()
	n := rw.nodes[owner]
	rw.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if n == nil {
			if n, err = rw.create(ctx, dir, owner, mode); err != nil {
				return 0, 0, err
			}
		}
		children, err := call(ctx, b, func() ([]string, error) {
			ch, _, err := b.conn.Children(dir)
			return ch, err
		})
		if err == nil {
			err = heldAsSemaphore(name, children)
		}
		if err != nil {
			rw.drop(ctx, owner, n)
			return 0, 0, err
		}
		found, blocked := placeOf(children, n.path[len(dir)+1:], mode)
		switch {
		case !found && attempt == 0:
			// Our node is gone (the session expired, an operator): again.
			rw.forget(owner, n)
			n = nil
			continue
		case !found:
			rw.forget(owner, n)
			return 0, 0, fmt.Errorf("zklock: our node under %s vanished twice", dir)
		case !blocked:
			rw.mu.Lock()
			n.held = true
			rw.nodes[owner] = n
			rw.mu.Unlock()
			return uint64(n.czxid), 0, nil
		case mode == rwlock.Write && intent:
			rw.mu.Lock()
			rw.nodes[owner] = n // keep its place
			rw.mu.Unlock()
			return 0, 0, lock.ErrNotAcquired
		default:
			rw.drop(ctx, owner, n)
			return 0, 0, lock.ErrNotAcquired
		}
	}
}

// create creates owner's node under dir, and dir's parents if missing.
// The create is not abandoned when ctx is done: a create abandoned in
// flight may still make the node, which nobody would then delete before
// the session ends, keeping every later contender out. It runs on a
// bounded context of its own instead, and a node made for a caller that
// has gone is deleted at once. A create whose answer was lost with the
// connection is looked for by its GUID, as New's Locker does.
func (rw *rwBackend) create(ctx context.Context, dir, owner string, mode rwlock.Mode) (*rwNode, error) {
	b := rw.b
	n := &rwNode{dir: dir, guid: newGUID(KazooNames)}
	kind := readNode
	if mode == rwlock.Write {
		kind = writeNode
	}
	var label []byte
	if _, l, _ := lock.ParseOwner(owner); l != "" {
		label = []byte(l)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	path := dir + "/" + n.guid + kind
	var st *zk.Stat
	var err error
	n.path, st, err = b.createNode(cctx, dir, n.guid, path, label)
	if err != nil {
		return nil, err
	}
	n.czxid, n.version = st.Czxid, st.Version
	if ctx.Err() != nil {
		rw.drop(ctx, owner, n)
		return nil, ctx.Err()
	}
	return n, nil
}

// createTimeout bounds a create and the read of its node.
const createTimeout = 5 * time.Second

// forget removes n from the map if it is owner's.
func (rw *rwBackend) forget(owner string, n *rwNode) {
	rw.mu.Lock()
	if rw.nodes[owner] == n {
		delete(rw.nodes, owner)
	}
	rw.mu.Unlock()
}

// drop deletes n (best effort: one that cannot be deleted is swept later)
// and forgets it.
func (rw *rwBackend) drop(ctx context.Context, owner string, n *rwNode) {
	rw.forget(owner, n)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := rw.b.deleteNode(rctx, n.path, n.version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		rw.b.orphan(n.dir, n.guid)
	}
}

// Certain implements rwlock.Bounded: a hold is certain up to the session's
// horizon (horizon.go).
func (rw *rwBackend) Certain(sent time.Time, ttl time.Duration) time.Duration {
	return rw.b.certain(sent, ttl)
}

// Renew checks, as New's Locker does, that the session is connected and
// our node still exists with our czxid.
func (rw *rwBackend) Renew(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration) error {
	b := rw.b
	rw.mu.Lock()
	n := rw.nodes[owner]
	rw.mu.Unlock()
	if n == nil || !n.held {
		return lockerr.NotHeld("zklock: not held")
	}
	st, err := b.renewStat(ctx, n.path, ttl)
	if err != nil {
		return err
	}
	if st == nil || st.Czxid != n.czxid || st.EphemeralOwner != b.conn.SessionID() {
		rw.forget(owner, n)
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s is gone (session expired or deleted)", n.path))
	}
	return nil
}

func (rw *rwBackend) Release(ctx context.Context, name, owner string, mode rwlock.Mode) error {
	rw.mu.Lock()
	n := rw.nodes[owner]
	delete(rw.nodes, owner)
	rw.mu.Unlock()
	if n == nil {
		return lockerr.NotHeld("zklock: no node for this owner")
	}
	err := rw.b.deleteNode(ctx, n.path, n.version)
	switch {
	case err == nil && n.held:
		return nil
	case err == nil, errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s is gone", n.path))
	default:
		rw.b.orphan(n.dir, n.guid)
		return err
	}
}

func (rw *rwBackend) Withdraw(ctx context.Context, name, owner string) error {
	rw.mu.Lock()
	n := rw.nodes[owner]
	if n == nil || n.held {
		rw.mu.Unlock()
		return nil
	}
	rw.mu.Unlock()
	rw.drop(ctx, owner, n)
	return nil
}

// WatchRelease watches name's children: any change (a node deleted, or
// created) wakes the waiter, which attempts again.
func (rw *rwBackend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	b := rw.b
	dir, err := b.dir(name)
	if err != nil {
		return nil, nil, err
	}
	arm := func() (<-chan zk.Event, error) {
		return call(ctx, b, func() (<-chan zk.Event, error) {
			_, _, ev, err := b.conn.ChildrenW(dir)
			if errors.Is(err, zk.ErrNoNode) {
				_, _, ev, err = b.conn.ExistsW(dir)
			}
			return ev, err
		})
	}
	ev, err := arm() // in place before the first attempt
	if err != nil {
		return nil, nil, err
	}
	wake := waitq.NewWake()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ev:
			case <-stop:
				return
			}
			wake.Signal()
			var err error
			if ev, err = arm(); err != nil {
				return // the Manager polls as a safety net
			}
		}
	}()
	var once sync.Once
	return wake, func() { once.Do(func() { close(stop); <-done }) }, nil
}

// znode is a node's data and stat.
type znode struct {
	data []byte
	stat *zk.Stat
}

// InspectRW implements rwlock.Inspector: the children in sequence order
// tell the holders (readers before the first writer, or that writer if it
// comes first) from the waiters. TimeLeft is lock.Unknown: a node lives as
// long as its session.
func (rw *rwBackend) InspectRW(ctx context.Context, name string) (rwlock.Info, error) {
	var info rwlock.Info
	b := rw.b
	dir, err := b.dir(name)
	if err != nil {
		return info, err
	}
	children, err := call(ctx, b, func() ([]string, error) {
		ch, _, err := b.conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return ch, err
	})
	if err != nil {
		return info, err
	}
	var contenders []string
	for _, ch := range children {
		if _, ok := sequence(ch); ok {
			contenders = append(contenders, ch)
		}
	}
	sort.Slice(contenders, func(i, j int) bool {
		a, _ := sequence(contenders[i])
		c, _ := sequence(contenders[j])
		return a < c
	})
	writerAhead := false
	for _, ch := range contenders {
		node, err := call(ctx, b, func() (znode, error) {
			d, st, err := b.conn.Get(dir + "/" + ch)
			return znode{d, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return info, err
		}
		h := rwlock.Holder{Label: string(node.data), Token: uint64(node.stat.Czxid), TimeLeft: lock.Unknown}
		info.Token = max(info.Token, h.Token)
		switch {
		case !isReader(ch):
			if !writerAhead && len(info.Readers) == 0 {
				info.Writer = &h
			} else {
				info.WritersWaiting++
			}
			writerAhead = true
		case !writerAhead:
			info.Readers = append(info.Readers, h)
		}
	}
	return info, nil
}
