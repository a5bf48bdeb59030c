package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// cleanupTimeout bounds the best-effort deletes of nodes nobody will use
// again. If one fails, the node is remembered and deleted by a later call,
// or at the latest when the session ends.
const cleanupTimeout = time.Second

// errNoSession is returned, as a transient error, for calls made while the
// session is not connected: the Manager retries renewals until its deadline.
var errNoSession = errors.New("zklock: not connected to a server")

// backend implements driver.Backend with one ephemeral-sequential node per
// contender (see the package doc).
type backend struct {
	conn   *zk.Conn
	log    *sessionLog
	prefix string
	names  NodeNames
	acl    []zk.ACL

	owners waitq.Registry[*contender] // by Manager owner

	horizon  *horizon      // when the leader last heard of the session (horizon.go)
	tickTime time.Duration // WithTickTime's, or 0
	stop     chan struct{} // closed by close: ends the heartbeat

	mu      sync.Mutex
	orphans map[string]string // GUID -> lock dir of nodes to delete; guarded by mu
	closed  bool              // guarded by mu
	sweeps  sync.WaitGroup    // background sweeps after a reconnect, and the heartbeat
}

var (
	_ driver.Backend         = (*backend)(nil)
	_ driver.ServerQueue     = (*backend)(nil)
	_ driver.BoundedAcquirer = (*backend)(nil)
	_ driver.BoundedRenewer  = (*backend)(nil)
)

// newBackend returns the backend of a connected session and starts its
// heartbeat.
func newBackend(conn *zk.Conn, log *sessionLog, h *horizon, o options) *backend {
	b := &backend{
		conn: conn, log: log, prefix: o.prefix, names: o.names,
		acl:      o.acl,
		orphans:  map[string]string{},
		horizon:  h,
		tickTime: o.tick,
		stop:     make(chan struct{}),
	}
	b.sweeps.Add(1)
	go b.heartbeat(b.stop)
	return b
}

func (b *backend) sessionTimeout() time.Duration {
	return time.Duration(b.log.timeoutMs.Load()) * time.Millisecond
}

func (b *backend) close() {
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.mu.Unlock()
	if !already {
		close(b.stop)
		b.conn.Close()
	}
	b.sweeps.Wait()
}

// reconnected runs after each session handshake. Nodes we failed to delete
// while disconnected are still there if the session survived, and would
// block their locks for as long as it lives: delete them now.
func (b *backend) reconnected() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.orphans) == 0 {
		return
	}
	b.sweeps.Add(1)
	go func() {
		defer b.sweeps.Done()
		b.sweep(context.Background())
	}()
}

func (b *backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// A contender is one Acquire's node in a lock's queue, from its first
// attempt until it is released, lost or withdrawn.
type contender struct {
	// A queued contender (its Acquire waits) keeps its node in the queue
	// between attempts, watching its predecessor.
	waitq.Waiter

	mu       sync.Mutex // serialises the calls for this owner, guards the rest
	dir      string     // the lock's znode, parent of the contenders
	label    []byte     // the holder label: our node's data
	guid     string     // in our node's name; "" until the first create
	node     string     // our node's full path; "" when we have none
	czxid    int64      // our node's creation zxid: the fencing token
	version  int32      // our node's data version, for the checked delete
	held     bool
	pred     string        // predecessor being watched ("" if none)
	stopPred chan struct{} // closed to stop the predecessor watch
}

func newContender() *contender { return &contender{} }

// call runs one ZooKeeper request, bounded by ctx: go-zookeeper's calls take
// no context and wait for the answer or the loss of the connection. A call
// abandoned by ctx finishes in the background.
func call[T any](ctx context.Context, b *backend, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if b.isClosed() {
		return zero, zk.ErrClosing
	}
	if s := b.conn.State(); s != zk.StateHasSession {
		return zero, fmt.Errorf("%w (state %v)", errNoSession, s)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		sent := time.Now()
		v, err := f()
		if answered(err) {
			b.horizon.touched(sent, b.gap())
		}
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// createNode creates path, an ephemeral sequential child of dir named with
// guid, holding data, and dir and its parents if they are missing. A create
// whose answer was lost is looked for by its GUID. It returns the node and
// its stat; a node it cannot stat is remembered as an orphan.
func (b *backend) createNode(ctx context.Context, dir, guid, path string, data []byte) (string, *zk.Stat, error) {
	var node string
	var err error
	for range 3 {
		node, err = call(ctx, b, func() (string, error) {
			return b.conn.Create(path, data, zk.FlagEphemeral|zk.FlagSequence, b.acl)
		})
		if errors.Is(err, zk.ErrNoNode) {
			if err = b.createParents(ctx, dir); err != nil {
				break
			}
			continue
		}
		if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, context.DeadlineExceeded) {
			node, err = b.findGUID(ctx, dir, guid, err)
		}
		break
	}
	if err != nil {
		return "", nil, err
	}
	st, err := b.stat(ctx, node)
	if err == nil && st == nil {
		err = zk.ErrNoNode
	}
	if err != nil {
		b.orphan(dir, guid)
		return "", nil, fmt.Errorf("zklock: stat our new node: %w", err)
	}
	return node, st, nil
}

// checkTTL refuses, with an error wrapping lock.ErrInvalid, a TTL longer
// than the session timeout: the session, not the TTL, keeps a node, and a
// partition ends the lock after the session timeout (Lease.Extend asks for
// more).
func (b *backend) checkTTL(ttl time.Duration) error {
	if st := b.sessionTimeout(); ttl > st {
		return fmt.Errorf("%w: zklock: TTL %v is longer than the session timeout %v the server granted", lock.ErrInvalid, ttl, st)
	}
	return nil
}

// stat returns path's stat, or nil if it does not exist.
func (b *backend) stat(ctx context.Context, path string) (*zk.Stat, error) {
	return call(ctx, b, func() (*zk.Stat, error) {
		ok, st, err := b.conn.Exists(path)
		if err == nil && !ok {
			st = nil
		}
		return st, err
	})
}

// renewStat is a renewal's look at its node at path: it refuses a closed
// Locker (lockerr.NotHeld) and a TTL that checkTTL refuses, else returns
// stat's answer.
func (b *backend) renewStat(ctx context.Context, path string, ttl time.Duration) (*zk.Stat, error) {
	if b.isClosed() {
		return nil, lockerr.NotHeld("zklock: Locker closed")
	}
	if err := b.checkTTL(ttl); err != nil {
		return nil, err
	}
	return b.stat(ctx, path)
}

// answered reports whether a call's error, nil included, is the server's
// answer: the request reached it.
func answered(err error) bool {
	return err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists) ||
		errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNotEmpty)
}

// dir returns the znode of lock key, or an error wrapping lock.ErrInvalid
// when key does not make a valid ZooKeeper path.
func (b *backend) dir(key string) (string, error) {
	p := b.prefix + "/" + key
	if err := validPath(p); err != nil {
		return "", fmt.Errorf("%w: zklock: key %q: %w", lock.ErrInvalid, key, err)
	}
	return p, nil
}

// validPath checks the rules of ZooKeeper's PathUtils.validatePath that a
// key can break: absolute, no empty, "." or ".." segment, no trailing slash,
// no control or reserved characters.
func validPath(p string) error {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return errors.New("not an absolute path")
	}
	if strings.HasSuffix(p, "/") {
		return errors.New("ends with /")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("has segment %q", seg)
		}
	}
	for _, r := range p {
		switch {
		case r == 0, r > 0 && r < 0x20, r >= 0x7f && r <= 0x9f,
			r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
			return fmt.Errorf("has character %U", r)
		}
	}
	return nil
}

// newGUID returns a random UUID (version 4) in the form the node names use.
func newGUID(names NodeNames) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	if names == KazooNames {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// nodePrefix is the name our node is created with, before ZooKeeper appends
// the 10-digit sequence number.
func nodePrefix(names NodeNames, guid string) string {
	if names == KazooNames {
		return guid + "__lock__"
	}
	return "_c_" + guid + "-lock-"
}

// sequence returns the sequence number ZooKeeper appended to a contender's
// name, and false for a child that is no contender: only names ending in
// "lock-" (Curator), "__lock__" or "__rlock__" (kazoo's Lock and ReadLock)
// followed by ten digits count.
func sequence(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	head, tail := name[:len(name)-10], name[len(name)-10:]
	if !strings.HasSuffix(head, "lock-") && !strings.HasSuffix(head, "__lock__") && !strings.HasSuffix(head, "__rlock__") {
		return 0, false
	}
	for i := 0; i < len(tail); i++ {
		if tail[i] < '0' || tail[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(tail, 10, 64)
	return n, err == nil
}

// position finds our node among children: whether it is there, and the name
// of the contender just ahead of it ("" if ours is first).
func position(children []string, ours string) (found bool, pred string) {
	mine, ok := sequence(ours)
	if !ok {
		return false, ""
	}
	var best int64 = -1
	for _, ch := range children {
		if ch == ours {
			found = true
			continue
		}
		n, ok := sequence(ch)
		if !ok || n >= mine {
			continue
		}
		if n > best {
			best, pred = n, ch
		}
	}
	return found, pred
}

// TryAcquire implements driver.Backend: it creates the owner's node if it is
// not in the queue yet, and holds the lock when no contender has a lower
// sequence number.
func (b *backend) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	dir, err := b.dir(key)
	if err != nil {
		return 0, 0, err
	}
	if err := b.checkTTL(ttl); err != nil {
		return 0, 0, err
	}
	b.sweep(ctx)
	c := b.owners.GetOrAdd(owner, newContender)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir = dir
	if _, label, _ := lock.ParseOwner(owner); label != "" {
		c.label = []byte(label)
	}
	for range 2 {
		token, gone, err := b.tryLocked(ctx, c, key, owner)
		if !gone {
			return token, 0, err
		}
		// Our node is gone: the session expired, or someone deleted it.
		// Queue again, once.
		c.stopPredLocked()
		c.node = ""
	}
	return 0, 0, fmt.Errorf("zklock: our node under %s vanished twice", dir)
}

// tryLocked makes one round of TryAcquire for c, owner's contender, which
// it puts in the queue if it is not: it holds if c's node is first, else
// waits behind its predecessor, or withdraws if c does not wait. gone
// reports that c's node has vanished. Call with c.mu held.
func (b *backend) tryLocked(ctx context.Context, c *contender, key, owner string) (token uint64, gone bool, err error) {
	if c.node == "" {
		if err := b.create(ctx, c); err != nil {
			if !c.Queued() {
				b.owners.Forget(owner, c)
			}
			return 0, false, err
		}
	}
	dir := c.dir
	children, err := call(ctx, b, func() ([]string, error) {
		ch, _, err := b.conn.Children(dir)
		return ch, err
	})
	if err != nil {
		return 0, false, err
	}
	if err := heldAsSemaphore(key, children); err != nil {
		b.withdraw(ctx, c)
		b.owners.Forget(owner, c)
		return 0, false, err
	}
	found, pred := position(children, c.node[len(dir)+1:])
	switch {
	case !found:
		return 0, true, nil
	case pred == "":
		c.stopPredLocked()
		c.held = true
		return uint64(c.czxid), false, nil
	case !c.Queued():
		b.withdraw(ctx, c)
		b.owners.Forget(owner, c)
		return 0, false, lock.ErrNotAcquired
	}
	if err := b.watchPredecessor(ctx, c, pred); err != nil {
		return 0, false, err
	}
	return 0, false, lock.ErrNotAcquired
}

// create creates c's node, and the lock's parents if they are missing. A
// create whose answer was lost (the connection dropped) may have created the
// node; like Curator's protected mode we then look for our GUID among the
// children, and otherwise remember it as an orphan to delete later.
//
// As rwBackend.create, the create is not abandoned when ctx is done: a
// create abandoned in flight may still make the node after the lookup of
// its GUID was answered (the lookup can reach the server first), and the
// node, ephemeral, would then keep every later contender out for as long
// as the Locker stays connected. It runs on a bounded context of its own,
// and a node made for a caller that has gone is deleted at once.
func (b *backend) create(ctx context.Context, c *contender) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.guid = newGUID(b.names)
	path := c.dir + "/" + nodePrefix(b.names, c.guid)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	node, st, err := b.createNode(cctx, c.dir, c.guid, path, c.label)
	if err != nil {
		return err
	}
	c.node, c.czxid, c.version = node, st.Czxid, st.Version
	if err := ctx.Err(); err != nil {
		b.withdraw(ctx, c)
		return err
	}
	if queued, ok := ctx.Value(queuedKey{}).(func()); ok {
		queued()
	}
	return nil
}

// queuedKey is the context key of a function create calls once it has made
// a contender's node: a semaphore's waiter, which queues for the
// semaphore's lock in the background, learns that it stands in line.
type queuedKey struct{}

// findGUID looks for the node a create with an unknown outcome may have made.
func (b *backend) findGUID(ctx context.Context, dir, guid string, cause error) (string, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	children, err := call(rctx, b, func() ([]string, error) {
		ch, _, err := b.conn.Children(dir)
		return ch, err
	})
	if err != nil {
		b.orphan(dir, guid)
		return "", cause
	}
	for _, ch := range children {
		if strings.Contains(ch, guid) {
			if ctx.Err() != nil {
				_ = b.deleteNode(rctx, dir+"/"+ch, -1)
				return "", cause
			}
			return dir + "/" + ch, nil
		}
	}
	// A create still unanswered may make the node yet: the next sweep
	// looks again.
	b.orphan(dir, guid)
	return "", cause
}

// createParents creates the missing ancestors of dir as container nodes,
// which the server deletes once their last child is gone (ZooKeeper 3.5+),
// so lock paths do not pile up; the prefix's own ancestors are persistent.
func (b *backend) createParents(ctx context.Context, dir string) error {
	parts := strings.Split(dir[1:], "/")
	pre := len(strings.Split(strings.TrimPrefix(b.prefix, "/"), "/"))
	if b.prefix == "" {
		pre = 0
	}
	p := ""
	for i, part := range parts {
		p += "/" + part
		_, err := call(ctx, b, func() (string, error) {
			if i >= pre {
				return b.conn.CreateContainer(p, nil, zk.FlagContainer, b.acl)
			}
			return b.conn.Create(p, nil, 0, b.acl)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zklock: create %s: %w", p, err)
		}
	}
	return nil
}

// withdraw deletes c's node, if it has one (best effort).
func (b *backend) withdraw(ctx context.Context, c *contender) {
	c.stopPredLocked()
	if c.node == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := b.deleteNode(rctx, c.node, c.version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		b.orphan(c.dir, c.guid)
	}
	c.node = ""
}

func (b *backend) deleteNode(ctx context.Context, path string, version int32) error {
	_, err := call(ctx, b, func() (struct{}, error) {
		return struct{}{}, b.conn.Delete(path, version)
	})
	return err
}

// orphan remembers a node of ours that may exist but could not be deleted:
// until deleted it would block the lock for as long as the session lives.
func (b *backend) orphan(dir, guid string) {
	b.mu.Lock()
	b.orphans[guid] = dir
	b.mu.Unlock()
}

// sweep deletes remembered orphans (best effort; bounded by cleanupTimeout).
func (b *backend) sweep(ctx context.Context) {
	b.mu.Lock()
	if len(b.orphans) == 0 {
		b.mu.Unlock()
		return
	}
	todo := make(map[string]string, len(b.orphans))
	for g, d := range b.orphans {
		todo[g] = d
	}
	b.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for guid, dir := range todo {
		children, err := call(rctx, b, func() ([]string, error) {
			ch, _, err := b.conn.Children(dir)
			return ch, err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			continue
		}
		ok := true
		for _, ch := range children {
			if strings.Contains(ch, guid) {
				if err := b.deleteNode(rctx, dir+"/"+ch, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					ok = false
				}
			}
		}
		if ok {
			b.mu.Lock()
			delete(b.orphans, guid)
			b.mu.Unlock()
		}
	}
}

// Renew implements driver.Backend; the Manager calls RenewPartial.
func (b *backend) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	_, err := b.RenewPartial(ctx, key, owner, ttl)
	return err
}

// RenewPartial implements driver.BoundedRenewer. ZooKeeper's session keeps the
// node alive, so renewal is a check: the session is connected and our node
// still exists with our czxid. The answer may come from a follower cut off
// from the leader, so it vouches for the lease only up to the session's
// horizon (horizon.go), not for ttl from now.
func (b *backend) RenewPartial(ctx context.Context, key, owner string, ttl time.Duration) (time.Duration, error) {
	sent := time.Now()
	if err := b.renew(ctx, owner, ttl); err != nil {
		return 0, err
	}
	return b.certain(sent, ttl), nil
}

// TryAcquirePartial implements driver.BoundedAcquirer: TryAcquire, certain up
// to the session's horizon (horizon.go).
func (b *backend) TryAcquirePartial(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	sent := time.Now()
	token, holderTTL, err := b.TryAcquire(ctx, key, owner, ttl)
	if err != nil {
		return 0, 0, holderTTL, err
	}
	return token, b.certain(sent, ttl), 0, nil
}

func (b *backend) renew(ctx context.Context, owner string, ttl time.Duration) error {
	c := b.owners.Get(owner)
	if c == nil {
		return lockerr.NotHeld("zklock: no node for this owner")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held || c.node == "" {
		return lockerr.NotHeld("zklock: not held")
	}
	st, err := b.renewStat(ctx, c.node, ttl)
	if err != nil {
		return err
	}
	if st == nil || st.Czxid != c.czxid {
		node := c.node
		c.held, c.node = false, ""
		b.owners.Forget(owner, c)
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s is gone (session expired or deleted)", node))
	}
	if st.EphemeralOwner != b.conn.SessionID() {
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s belongs to session %x, not ours", c.node, st.EphemeralOwner))
	}
	return nil
}

// Release implements driver.Backend: a version-checked delete of our own node,
// whose name (GUID and sequence number) no other contender can have; it never
// deletes the next holder's node.
func (b *backend) Release(ctx context.Context, key, owner string) error {
	c := b.owners.Take(owner)
	if c == nil {
		return lockerr.NotHeld("zklock: no node for this owner")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopPredLocked()
	c.held = false
	if c.node == "" {
		return lockerr.NotHeld("zklock: no node was created")
	}
	node := c.node
	err := b.deleteNode(ctx, node, c.version)
	switch {
	case err == nil:
		c.node = ""
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		c.node = ""
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s is gone", node))
	default:
		b.orphan(c.dir, c.guid)
		c.node = ""
		return err
	}
}
