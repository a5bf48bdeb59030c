package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// NewSemaphores connects to the ZooKeeper servers, as New does, and returns a
// semaphore.Client whose permits are kept in the node layout of Python
// kazoo's Semaphore, so Go and Python services can share one:
//
//   - The semaphore's node, <prefix>/<name>, holds N in decimal. kazoo
//     refuses to acquire with another N (ValueError); so do we
//     (semaphore.ErrMismatch), except that we set it anew when the node has
//     no lease left (kazoo itself never changes it).
//   - Each permit held is an ephemeral child of it, whose data is the
//     holder label (kazoo: the identifier). kazoo names them by a random
//     UUID in hex and takes one per acquisition; we name them by the
//     Acquire's random id, and an acquisition of k permits creates k
//     children, id, id-2, ... id-k, in one multi-operation.
//   - An acquirer first takes the lock <prefix>/<name>-__lock__, a kazoo
//     Lock (this package's Locker with KazooNames), lists the children and
//     creates its permits if enough are free, then releases the lock. A
//     waiter keeps the lock while it waits and is the only one to watch the
//     children, so waiters are served in the order they queued for the lock,
//     across every client, and a release wakes one of them.
//
// Apache Curator's InterProcessSemaphoreV2 lays its nodes out differently
// (<path>/locks and <path>/leases, N not stored), and cannot share one.
//
// The fencing token is the czxid of the first permit node. As with the
// Locker, permits live as long as the session: WithTTL is the holder's local
// deadline, must not exceed the session timeout the server granted, and a
// crashed holder's permits return when its session expires (after the
// session timeout, not before). The options are New's; WithNodeNames is
// ignored (the lock is kazoo's). Close the Client to end the session.
func NewSemaphores(ctx context.Context, servers []string, opts ...Option) (*semaphore.Client, error) {
	inner, err := New(ctx, servers, append(slices.Clone(opts), WithNodeNames(KazooNames))...)
	if err != nil {
		return nil, err
	}
	return semaphore.New(&semBackend{inner: inner, b: inner.b, permits: map[string]*zkPermit{}, waiters: map[string]*zkWaiter{}})
}

// semLockSuffix names a semaphore's lock node after the semaphore's, as
// kazoo does.
const semLockSuffix = "-__lock__"

// semBackend is the semaphore.Backend on ZooKeeper.
type semBackend struct {
	inner *Locker  // the semaphore locks, and the session
	b     *backend // inner's, for the session and its calls

	mu      sync.Mutex
	permits map[string]*zkPermit // held, by owner; guarded by mu
	waiters map[string]*zkWaiter // waiting Acquire calls, by owner; guarded by mu
}

var (
	_ semaphore.Backend     = (*semBackend)(nil)
	_ semaphore.Bounded     = (*semBackend)(nil)
	_ semaphore.ServerQueue = (*semBackend)(nil)
	_ semaphore.Inspector   = (*semBackend)(nil)
)

// A zkPermit is one acquisition's permit nodes.
type zkPermit struct {
	nodes []string
	czxid int64
}

// A zkWaiter is a waiting Acquire: it queues for the semaphore's lock in the
// background and, once it holds the lock, watches the children.
type zkWaiter struct {
	wake   waitq.Wake
	cancel context.CancelFunc
	done   chan struct{} // closed when the lock-taking goroutine ends

	mu    sync.Mutex
	lease *lock.Lease // the semaphore's lock, once held; guarded by mu
}

// Close ends the session: every permit node of this Client is deleted.
func (s *semBackend) Close() error { return s.inner.Close() }

// semDir returns the semaphore's node, or an error wrapping
// lock.ErrInvalid when name makes no valid ZooKeeper path.
func (s *semBackend) semDir(name string) (string, error) {
	if _, err := s.b.dir(name + semLockSuffix); err != nil {
		return "", err
	}
	return s.b.dir(name)
}

// WatchReleaseOwner implements semaphore.ServerQueue: the waiting Acquire
// queues for the semaphore's lock, and waits for it in the background. It
// returns once the waiter's node stands in the lock's line (or its wait
// ended first), so waiters counted as waiting are served in the order they
// were counted.
func (s *semBackend) WatchReleaseOwner(ctx context.Context, r semaphore.Request, owner string) (<-chan struct{}, func(), error) {
	queued := make(chan struct{})
	wctx, cancel := context.WithCancel(context.WithValue(context.Background(), queuedKey{}, sync.OnceFunc(func() { close(queued) })))
	w := &zkWaiter{wake: waitq.NewWake(), cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.waiters[owner] = w
	s.mu.Unlock()
	go func() {
		defer close(w.done)
		l, err := s.inner.Acquire(wctx, r.Name+semLockSuffix, lock.WithTTL(s.b.sessionTimeout()))
		if err != nil {
			w.wake.Signal() // the attempt tells what went wrong
			return
		}
		w.mu.Lock()
		w.lease = l
		w.mu.Unlock()
		w.wake.Signal()
	}()
	select {
	case <-queued:
	case <-w.done:
	case <-ctx.Done():
	}
	stop := func() {
		s.mu.Lock()
		delete(s.waiters, owner)
		s.mu.Unlock()
		w.cancel()
		<-w.done
		w.mu.Lock()
		if w.lease != nil {
			_ = w.lease.Release(context.Background())
		}
		w.mu.Unlock()
	}
	return w.wake, stop, nil
}

// TryAcquire implements semaphore.Backend: with the semaphore's lock held (a
// waiter's, or taken once for a try), it creates the permit nodes if enough
// are free.
func (s *semBackend) TryAcquire(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	dir, err := s.semDir(r.Name)
	if err != nil {
		return 0, 0, err
	}
	if err := s.b.checkTTL(ttl); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	w := s.waiters[owner]
	s.mu.Unlock()
	var wake waitq.Wake
	if w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.lease == nil {
			return 0, 0, lock.ErrNotAcquired // still queued for the lock
		}
		if w.lease.Err() != nil {
			// The lock was lost (the session ended): queue for it again.
			return 0, 0, fmt.Errorf("zklock: the semaphore's lock was lost while waiting: %w", w.lease.Err())
		}
		wake = w.wake
	} else {
		l, err := s.inner.Acquire(ctx, r.Name+semLockSuffix, lock.WithWait(0), lock.WithTTL(s.b.sessionTimeout()))
		if err != nil {
			return 0, 0, err
		}
		defer func() { _ = l.Release(context.Background()) }()
	}
	token, err := s.takeLocked(ctx, dir, r, owner, wake)
	if err == nil && w != nil {
		// Held: the next waiter may have the lock.
		_ = w.lease.Release(context.Background())
		w.lease = nil
	}
	return token, 0, err
}

// takeLocked checks N and the free permits under dir and creates the
// permit nodes; the caller holds the semaphore's lock. When wake is not nil
// and too few are free, a change of the children signals it.
func (s *semBackend) takeLocked(ctx context.Context, dir string, r semaphore.Request, owner string, wake waitq.Wake) (uint64, error) {
	b := s.b
	if err := b.createParents(ctx, dir); err != nil {
		return 0, err
	}
	n, err := s.readDir(ctx, dir, wake)
	if err != nil {
		return 0, err
	}
	if err := heldAsQueue(r.Name, n.kids); err != nil {
		return 0, err
	}
	if err := s.settleCount(ctx, dir, r, n); err != nil {
		return 0, err
	}
	if len(n.kids)+r.Count > r.Permits {
		return 0, lock.ErrNotAcquired
	}
	p, err := s.createPermits(ctx, dir, r, owner)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.permits[owner] = p
	s.mu.Unlock()
	return uint64(p.czxid), nil
}

// A semDir is a semaphore's node as takeLocked reads it: its data (N),
// stat and children (the permits held).
type semDir struct {
	data []byte
	st   *zk.Stat
	kids []string
	ev   <-chan zk.Event // the children's watch, or nil
}

// readDir reads dir and its children; with wake, a change of the children
// signals it once.
func (s *semBackend) readDir(ctx context.Context, dir string, wake waitq.Wake) (semDir, error) {
	b := s.b
	n, err := call(ctx, b, func() (semDir, error) {
		data, st, err := b.conn.Get(dir)
		if err != nil {
			return semDir{}, err
		}
		var kids []string
		var ev <-chan zk.Event
		if wake != nil {
			kids, _, ev, err = b.conn.ChildrenW(dir)
		} else {
			kids, _, err = b.conn.Children(dir)
		}
		return semDir{data, st, kids, ev}, err
	})
	if err != nil {
		return semDir{}, fmt.Errorf("zklock: %w", err)
	}
	if n.ev != nil {
		go func() {
			if _, ok := <-n.ev; ok {
				wake.Signal()
			}
		}()
	}
	return n, nil
}

// settleCount checks r's N against the one dir stores: another N while
// permits are held is a *semaphore.MismatchError; with no N yet, or nobody
// holding, r's becomes the N.
func (s *semBackend) settleCount(ctx context.Context, dir string, r semaphore.Request, n semDir) error {
	stored, numeric := strconv.Atoi(strings.TrimSpace(string(n.data)))
	if numeric == nil && stored == r.Permits {
		return nil
	}
	if numeric == nil && len(n.kids) > 0 {
		return &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: stored}
	}
	b := s.b
	if _, err := call(ctx, b, func() (*zk.Stat, error) {
		return b.conn.Set(dir, []byte(strconv.Itoa(r.Permits)), n.st.Version)
	}); err != nil {
		return fmt.Errorf("zklock: set the permit count of %s: %w", dir, err)
	}
	return nil
}

// createPermits creates owner's r.Count permit nodes under dir in one
// multi, then checks that no contender of another mode is beside them
// (modes.go) and reads the first's czxid, the token. On failure it
// deletes the nodes.
func (s *semBackend) createPermits(ctx context.Context, dir string, r semaphore.Request, owner string) (*zkPermit, error) {
	b := s.b
	id, label, _ := lock.ParseOwner(owner)
	p := &zkPermit{}
	ops := make([]any, r.Count)
	for i := range r.Count {
		name := id
		if i > 0 {
			name += "-" + strconv.Itoa(i+1)
		}
		p.nodes = append(p.nodes, dir+"/"+name)
		ops[i] = &zk.CreateRequest{Path: dir + "/" + name, Data: []byte(label), Acl: b.acl, Flags: zk.FlagEphemeral}
	}
	if _, err := call(ctx, b, func() ([]zk.MultiResponse, error) { return b.conn.Multi(ops...) }); err != nil {
		return nil, fmt.Errorf("zklock: create the permit nodes under %s: %w", dir, err)
	}
	kids, err := call(ctx, b, func() ([]string, error) {
		kids, _, err := b.conn.Children(dir)
		return kids, err
	})
	if err == nil {
		err = heldAsQueue(r.Name, kids)
	}
	if err != nil {
		s.deleteNodes(p.nodes)
		return nil, err
	}
	st, err := call(ctx, b, func() (*zk.Stat, error) {
		_, st, err := b.conn.Exists(p.nodes[0])
		return st, err
	})
	if err != nil || st == nil {
		s.deleteNodes(p.nodes)
		return nil, fmt.Errorf("zklock: read the permit node %s: %w", p.nodes[0], err)
	}
	p.czxid = st.Czxid
	return p, nil
}

// deleteNodes deletes permit nodes, best effort: the session's end deletes
// what is left.
func (s *semBackend) deleteNodes(nodes []string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ops := make([]any, len(nodes))
	for i, n := range nodes {
		ops[i] = &zk.DeleteRequest{Path: n, Version: -1}
	}
	_, _ = call(ctx, s.b, func() ([]zk.MultiResponse, error) { return s.b.conn.Multi(ops...) })
}

var errZKPermitNotHeld = lockerr.NotHeld("zklock: the permit's node is gone (session expired or deleted)")

// Certain implements semaphore.Bounded: a permit is certain up to the
// session's horizon (horizon.go).
func (s *semBackend) Certain(sent time.Time, ttl time.Duration) time.Duration {
	return s.b.certain(sent, ttl)
}

// Renew implements semaphore.Backend, as the Locker's renewal: the session is
// connected and the first permit node is still ours.
func (s *semBackend) Renew(ctx context.Context, _ semaphore.Request, owner string, ttl time.Duration) error {
	s.mu.Lock()
	p := s.permits[owner]
	s.mu.Unlock()
	if p == nil {
		return errZKPermitNotHeld
	}
	if err := s.b.checkTTL(ttl); err != nil {
		return err
	}
	st, err := s.b.stat(ctx, p.nodes[0])
	if err != nil {
		return err
	}
	if st == nil || st.Czxid != p.czxid || st.EphemeralOwner != s.b.conn.SessionID() {
		return errZKPermitNotHeld
	}
	return nil
}

// Release implements semaphore.Backend: the permit nodes are deleted in one
// multi-operation, which fails, deleting none, if one is gone.
func (s *semBackend) Release(ctx context.Context, _ semaphore.Request, owner string) error {
	s.mu.Lock()
	p := s.permits[owner]
	delete(s.permits, owner)
	s.mu.Unlock()
	if p == nil {
		return errZKPermitNotHeld
	}
	ops := make([]any, len(p.nodes))
	for i, n := range p.nodes {
		ops[i] = &zk.DeleteRequest{Path: n, Version: -1}
	}
	_, err := call(ctx, s.b, func() ([]zk.MultiResponse, error) { return s.b.conn.Multi(ops...) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		s.deleteNodes(p.nodes) // those left, if any
		return errZKPermitNotHeld
	}
	return err
}

// InspectSemaphore implements semaphore.Inspector: N from the semaphore's
// node, and each permit node's data and czxid. Our nodes of one
// acquisition (id, id-2, ...) are one holder; every other node (kazoo's) one
// holder of one permit. TimeLeft is lock.Unknown: a permit lives as long as
// its session.
func (s *semBackend) InspectSemaphore(ctx context.Context, name string) (semaphore.Info, error) {
	info := semaphore.Info{Name: name}
	dir, err := s.semDir(name)
	if err != nil {
		return info, err
	}
	b := s.b
	type child struct {
		name, data string
		czxid      int64
	}
	type node struct {
		data []byte
		kids []child
	}
	n, err := call(ctx, b, func() (node, error) {
		data, _, err := b.conn.Get(dir)
		if err != nil {
			return node{}, err
		}
		names, _, err := b.conn.Children(dir)
		if err != nil {
			return node{}, err
		}
		out := node{data: data}
		for _, c := range names {
			d, st, err := b.conn.Get(dir + "/" + c)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return node{}, err
			}
			out.kids = append(out.kids, child{c, string(d), st.Czxid})
		}
		return out, nil
	})
	if errors.Is(err, zk.ErrNoNode) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("zklock: %w", err)
	}
	byID := map[string]int{} // acquisition id -> index in Holders
	for _, c := range n.kids {
		id, _, _ := strings.Cut(c.name, "-")
		if i, ok := byID[id]; ok && len(id) == ownerIDHexLen {
			info.Holders[i].Count++
			info.Holders[i].Token = uint64(min(int64(info.Holders[i].Token), c.czxid))
		} else {
			byID[id] = len(info.Holders)
			info.Holders = append(info.Holders, semaphore.HolderInfo{
				Holder: c.data, Entry: dir + "/" + c.name, Token: uint64(c.czxid), Count: 1, TimeLeft: lock.Unknown,
			})
		}
		info.Used++
		info.LastToken = max(info.LastToken, uint64(c.czxid))
	}
	if len(n.kids) > 0 {
		info.Permits, _ = strconv.Atoi(strings.TrimSpace(string(n.data)))
	}
	slices.SortFunc(info.Holders, func(a, b semaphore.HolderInfo) int { return int(int64(a.Token) - int64(b.Token)) })
	return info, nil
}

// ownerIDHexLen is the length of an Acquire's random id, which names its
// permit nodes.
const ownerIDHexLen = 32
