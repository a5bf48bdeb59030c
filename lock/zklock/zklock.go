package zklock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/lock"
)

// A Locker is a lock.Locker on one ZooKeeper ensemble, with one ZooKeeper
// session of its own. Its methods are safe for concurrent use. It starts
// goroutines for waiting Acquire calls (stopped when they return) and for
// renewal while leases are held. Close ends the session.
type Locker struct {
	*lock.Manager
	b *backend
}

var _ lock.Locker = (*Locker)(nil)

// NodeNames is the naming scheme of the lock nodes a Locker writes. Whatever
// it writes, a Locker orders every contender it recognises, in either
// scheme, by the sequence number ZooKeeper appended (see the package doc).
type NodeNames int

const (
	// CuratorNames writes _c_<uuid>-lock-<seq>, the protected names of Apache
	// Curator's InterProcessMutex, which then orders our nodes among its own.
	CuratorNames NodeNames = iota
	// KazooNames writes <uuid hex>__lock__<seq>, the names of Python kazoo's
	// Lock, which ignores nodes without "__lock__".
	KazooNames
)

// An Option configures New.
type Option func(*options)

type options struct {
	prefix  string
	session time.Duration
	tick    time.Duration
	names   NodeNames
	digest  bool     // WithDigestAuth was given
	user    string   // its user
	secret  string   // and password
	acl     []zk.ACL // of the nodes created; nil: see WithACL
}

// DefaultPrefix is the parent of every lock path unless WithPrefix is given.
const DefaultPrefix = "/latchkey"

// DefaultSessionTimeout is the session timeout New asks for unless
// WithSessionTimeout is given: as long as lock.DefaultTTL, so Acquire with
// the default TTL works when the server grants it (ZooKeeper's default
// maxSessionTimeout is 20 ticks, 40 s with the default 2 s tick).
const DefaultSessionTimeout = lock.DefaultTTL

// WithPrefix puts lock key k at the znode path prefix+"/"+k, under which each
// contender creates its node. Default: "/latchkey" (DefaultPrefix). prefix
// must be an absolute ZooKeeper path without a trailing slash, or "" (keys
// directly under the root). To share a lock with kazoo's zk.Lock("/a/b") or
// Curator's InterProcessMutex(client, "/a/b"), use prefix "/a" and key "b".
func WithPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// WithSessionTimeout sets the session timeout New asks the server for.
// Default: 30 s (DefaultSessionTimeout). The server clamps it to its
// [minSessionTimeout, maxSessionTimeout]; the negotiated value bounds the TTL
// Acquire accepts (see docs/zklock-internals.md).
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) { o.session = d }
}

// WithTickTime tells a Locker the servers' tickTime, which bounds how long
// a follower takes to tell the leader of this session's requests. A lease
// is certain only until the leader's last news of the session plus the
// session timeout (see docs/zklock-internals.md), and that news is up to one and a
// half ticks old. Default: DefaultTickTime (ZooKeeper's 2 s), at most half
// the session timeout granted. Give the servers' tickTime if it is longer
// than 2 s; a shorter one lets leases renewed by followers keep more margin.
func WithTickTime(d time.Duration) Option {
	return func(o *options) { o.tick = d }
}

// WithNodeNames sets the naming scheme of the nodes this Locker writes.
// Default: CuratorNames. Use KazooNames on paths shared with kazoo.
func WithNodeNames(n NodeNames) Option {
	return func(o *options) { o.names = n }
}

// WithDigestAuth authenticates the Locker's session with ZooKeeper's digest
// scheme as user with password (what Curator's authorization("digest",
// "user:password") and kazoo's auth_data=[("digest", "user:password")]
// send), again after every reconnection. The nodes the Locker creates are
// then open to that identity alone (CREATOR_ALL_ACL) unless WithACL says
// otherwise: a client without the credentials can neither delete a held
// lock's node nor change its data, nor contend for the lock. Every party
// of a lock (latchkey, Curator, kazoo) must authenticate as the same user.
// ZooKeeper does not check a digest password when a session authenticates,
// only when a node is used: a wrong password shows as an error wrapping
// zk.ErrNoAuth from Acquire.
func WithDigestAuth(user, password string) Option {
	return func(o *options) { o.user, o.secret, o.digest = user, password, true }
}

// WithACL sets the ACL of every node the Locker creates (lock, read-write
// lock, semaphore and election nodes, and their parents). Default: with
// WithDigestAuth, zk.AuthACL(zk.PermAll), the creator's identity alone;
// without it, zk.WorldACL(zk.PermAll), open to any client that reaches the
// ensemble. Nodes that already exist keep the ACL they were created with.
func WithACL(acl []zk.ACL) Option {
	return func(o *options) { o.acl = acl }
}

// New connects to the ZooKeeper servers (host:port each), waits until a
// session is established or ctx is done, and returns a Locker that keeps its
// locks under the prefix. Errors: one wrapping lock.ErrInvalid for bad
// options or no servers, ctx.Err() if no session was established in time.
func New(ctx context.Context, servers []string, opts ...Option) (*Locker, error) {
	o := options{prefix: DefaultPrefix, session: DefaultSessionTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: zklock: no servers", lock.ErrInvalid)
	}
	if o.prefix != "" {
		if err := validPath(o.prefix); err != nil {
			return nil, fmt.Errorf("%w: zklock: prefix: %w", lock.ErrInvalid, err)
		}
	}
	if o.session < time.Second/10 {
		return nil, fmt.Errorf("%w: zklock: session timeout %v too short", lock.ErrInvalid, o.session)
	}
	if o.tick < 0 {
		return nil, fmt.Errorf("%w: zklock: negative tick time %v", lock.ErrInvalid, o.tick)
	}
	if o.names != CuratorNames && o.names != KazooNames {
		return nil, fmt.Errorf("%w: zklock: unknown NodeNames %d", lock.ErrInvalid, o.names)
	}
	if err := o.checkAuth(); err != nil {
		return nil, err
	}
	log := &sessionLog{ready: make(chan struct{})}
	h := &horizon{}
	var b *backend
	var bmu sync.Mutex // guards b and dialed for the event callback, which may run before New returns
	var dialed time.Time
	onEvent := func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		bmu.Lock()
		defer bmu.Unlock()
		switch ev.State {
		case zk.StateConnected: // connected, handshake not yet sent
			dialed = time.Now()
		case zk.StateHasSession:
			h.handshake(dialed)
			if b != nil {
				b.reconnected()
			}
		}
	}
	conn, _, err := zk.Connect(servers, o.session, zk.WithLogger(log), zk.WithLogInfo(true), zk.WithEventCallback(onEvent))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	select {
	case <-log.ready:
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	}
	if o.digest {
		// go-zookeeper keeps the credentials and sends them again after
		// every reconnection, before any other request.
		if err := conn.AddAuth("digest", []byte(o.user+":"+o.secret)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zklock: digest authentication: %w", err)
		}
	}
	bmu.Lock()
	b = newBackend(conn, log, h, o)
	bmu.Unlock()
	m, err := lock.NewManager(b)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Locker{Manager: m, b: b}, nil
}

// checkAuth validates the credentials and the ACL, and chooses the ACL's
// default.
func (o *options) checkAuth() error {
	if o.digest && (o.user == "" || strings.ContainsAny(o.user, ":\x00")) {
		return fmt.Errorf("%w: zklock: digest user must be non-empty, without ':' or NUL", lock.ErrInvalid)
	}
	switch {
	case o.acl == nil && o.digest:
		o.acl = zk.AuthACL(zk.PermAll)
	case o.acl == nil:
		o.acl = zk.WorldACL(zk.PermAll)
	case len(o.acl) == 0:
		return fmt.Errorf("%w: zklock: empty ACL: nobody could use the nodes", lock.ErrInvalid)
	}
	for _, a := range o.acl {
		if a.Scheme == "auth" && !o.digest {
			return fmt.Errorf("%w: zklock: an ACL of the auth scheme needs WithDigestAuth", lock.ErrInvalid)
		}
	}
	return nil
}

// SessionTimeout returns the session timeout the server granted, the longest
// TTL Acquire accepts.
func (l *Locker) SessionTimeout() time.Duration { return l.b.sessionTimeout() }

// Close ends the session: the server deletes every node of this Locker at
// once, so its locks are free for others. Leases still held are lost at their
// next renewal. Close is safe to call more than once.
func (l *Locker) Close() error {
	l.b.close()
	return nil
}

// sessionLog learns the negotiated session timeout from the line go-zookeeper
// logs after each session handshake (v1.0.4 has no accessor for it) and
// drops every other line.
type sessionLog struct {
	timeoutMs atomic.Int64
	once      sync.Once
	ready     chan struct{} // closed after the first handshake
}

func (l *sessionLog) Printf(format string, args ...any) {
	if !strings.HasPrefix(format, "authenticated:") || len(args) != 2 {
		return
	}
	if ms, ok := args[1].(int32); ok && ms > 0 {
		l.timeoutMs.Store(int64(ms))
		l.once.Do(func() { close(l.ready) })
	}
}
