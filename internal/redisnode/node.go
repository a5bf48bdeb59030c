// Package redisnode is the driver.Backend on one Redis server or Cluster that
// lock/redislock's Locker runs on and that lock/redlock runs on each of its
// independent servers: the scripts, the key layout, the batching and the
// shared pub/sub subscription that wakes waiters. Its guarantees (keys,
// fencing tokens, waiting, loss) are those documented in lock/redislock's
// package doc, and its error messages are redislock's.
package redisnode

import (
	"context"
	cryptorand "crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	//go:embed token.lua
	tokenLua string

	//go:embed modes.lua
	modesLua string

	//go:embed acquire.lua
	acquireLua    string
	acquireScript = withToken(acquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed release_handover.lua
	releaseHandoverLua    string
	releaseHandoverScript = withToken(releaseHandoverLua)
)

// scriptError is the error of an acquisition script: a *lock.ModeError for
// other_mode's refusal (modes.lua), else err as redislock's.
func scriptError(err error, name string) error {
	held, ok := strings.CutPrefix(err.Error(), "MODE ")
	if !ok {
		return fmt.Errorf("redislock: %w", err)
	}
	e := &lock.ModeError{Key: name, HeldAs: held}
	if n, ok := strings.CutPrefix(held, lock.ModeSemaphore+" "); ok {
		e.HeldAs = lock.ModeSemaphore
		e.Permits, _ = strconv.Atoi(n)
	}
	return e
}

// withToken returns the script body preceded by token.lua's next_token, the
// one rule every script that issues a fencing token follows, and modes.lua
// (withModes).
func withToken(body string) *redis.Script {
	return redis.NewScript(tokenLua + modesLua + body)
}

// withModes returns the script body preceded by modes.lua: the mark a
// read-write lock or a semaphore leaves in its name's lock key (MODE_MARK,
// hold_mode) and other_mode, the check that one name is one resource.
func withModes(body string) *redis.Script {
	return redis.NewScript(modesLua + body)
}

// waitersFlagTTLArg is millis(waitersFlagTTL), boxed once.
var waitersFlagTTLArg any = millis(waitersFlagTTL)

// defaultTTLArg is millis(lock.DefaultTTL), boxed once: most leases ask for it.
var defaultTTLArg any = millis(lock.DefaultTTL)

// ttlArg returns millis(ttl) as a script argument, allocating none for the
// default TTL.
func ttlArg(ttl time.Duration) any {
	if ttl == lock.DefaultTTL {
		return defaultTTLArg
	}
	return millis(ttl)
}

// lockKeys returns the keys of key's lock, its fencing counter and its
// waiters flag (LockKey and its companions), built in one allocation. The
// name's other modes' keys are the lock's followed by ":rw:writer",
// ":rw:readers" (RWKeys), semSuffix and semSuffix+":holders"
// (SemaphoreKeys); acquire.lua names them itself, in the lock's hash slot.
func lockKeys(prefix, key string) [3]string {
	lk := LockKey(prefix, key)
	const fence, waiters = ":fence", ":waiters"
	all := lk + fence + lk + waiters
	n := len(lk)
	return [3]string{all[:n], all[:n+len(fence)], all[n+len(fence):]}
}

// waitersFlagTTL is how long a failed attempt marks a key as waited for, so
// that its releases publish a wake-up. A waiting Acquire attempts again at
// least once a second (the Manager's safety-net poll), renewing the mark, so
// the mark outlives the wait; once nobody waits, releases stop publishing.
const waitersFlagTTL = 10 * time.Second

// Client is what a Node needs from a go-redis client: scripts, pipelines
// and one pub/sub subscription (lock/redislock's Client).
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// A Node is the driver.Backend of one Redis server or Cluster. It implements
// driver.Backend, driver.BatchRenewer, driver.ReleaseWatcher and
// driver.PipelinedReleaser with the meanings documented there, and the methods
// of lock.Inspector, lock.Lister and lock.Breaker. Close stops its pub/sub
// subscription.
type Node struct {
	client    Client
	prefix    string
	channel   string // where releases of waited-for keys are published
	id        string // this Node's instance id, in its release messages
	retention int64  // fencing counter retention, ms
	exec      redisbatch.Runner
	w         *watcher

	retentionArg any // retention, boxed once: a script argument of every acquisition
}

var (
	_ driver.Backend           = (*Node)(nil)
	_ driver.BatchRenewer      = (*Node)(nil)
	_ driver.ReleaseWatcher    = (*Node)(nil)
	_ driver.PipelinedReleaser = (*Node)(nil)
	_ driver.HandoverReleaser  = (*Node)(nil)
)

// New returns a Node on client. It returns an error wrapping lock.ErrInvalid
// for a nil client or a bad option and touches no server.
func New(client Client, opts ...Option) (*Node, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redislock: nil client", lock.ErrInvalid)
	}
	o := Config{prefix: DefaultPrefix, retention: DefaultTokenRetention, batching: true}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.invalid != nil {
		return nil, o.invalid
	}
	b := &Node{
		client:    client,
		prefix:    o.prefix,
		channel:   o.prefix + "released",
		id:        newInstanceID(),
		retention: millis(o.retention),
	}
	b.retentionArg = b.retention
	b.exec = redisbatch.NewRunner(client, o.batching, o.sends)
	b.w = newWatcher(b)
	return b, nil
}

// Close stops the Node's pub/sub subscription and waits for its goroutine,
// then wakes its waiters, which go on by polling. It is safe to call more
// than once.
func (b *Node) Close() error {
	b.w.close()
	return nil
}

// TryAcquire implements driver.Backend.
func (b *Node) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	ks := lockKeys(b.prefix, key)
	n, err := b.exec.Run(ctx, nil, acquireScript, ks[:], owner, ttlArg(ttl), b.retentionArg, waitersFlagTTLArg).Int64()
	if err != nil {
		return 0, 0, scriptError(err, key)
	}
	if n <= 0 {
		return 0, time.Duration(-n) * time.Millisecond, lock.ErrNotAcquired
	}
	return uint64(n), 0, nil
}

// Renew implements driver.Backend.
func (b *Node) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	n, err := b.exec.Run(ctx, nil, renewScript, []string{LockKey(b.prefix, key)}, owner, millis(ttl)).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

// RenewBatch implements driver.BatchRenewer: one pipeline for the whole batch
// (on Redis Cluster, one per master, sent in parallel).
func (b *Node) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	return b.renewBatch(ctx, renewScript, errNotHeld, batch, func(r driver.Renewal) []string {
		return []string{LockKey(b.prefix, r.Key)}
	})
}

// renewBatch runs s, a renewal script answering 1 when renewed, for every
// lease in batch in one pipeline, with the script keys keys returns for it.
// A refused renewal's answer is notHeld.
func (b *Node) renewBatch(ctx context.Context, s *redis.Script, notHeld error, batch []driver.Renewal, keys func(driver.Renewal) []string) []error {
	errs := make([]error, len(batch))
	if len(batch) == 0 {
		return errs
	}
	cmds := make([]*redis.Cmd, len(batch))
	send := func(idx []int) error {
		pipe := b.client.Pipeline()
		for _, i := range idx {
			r := batch[i]
			cmds[i] = s.EvalSha(ctx, pipe, keys(r), r.Owner, millis(r.TTL))
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	all := make([]int, len(batch))
	for i := range all {
		all[i] = i
	}
	if err := send(all); err != nil {
		var missing []int
		for _, i := range all {
			if redisbatch.IsNoScript(cmds[i].Err()) {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			if err := s.Load(ctx, b.client).Err(); err == nil {
				_ = send(missing)
			}
		}
	}
	for _, i := range all {
		n, err := cmds[i].Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redislock: %w", err)
		case n != 1:
			errs[i] = notHeld
		}
	}
	return errs
}

// anonymous stands for the releasing Locker's id in the message of a
// Release: it is no Locker's (ids are hex), so every Locker's waiters hear
// it, the releasing one's included.
const anonymous = "----------------"

// Release implements driver.Backend.
func (b *Node) Release(ctx context.Context, key, owner string) error {
	return b.release(ctx, key, owner, anonymous, nil)
}

// ReleaseHandoff implements driver.PipelinedReleaser: handoff runs as soon as
// an attempt is sure to reach Redis after this release, so with batching
// both travel in one round trip. The release message carries this Locker's
// id, which its own subscription skips. If the release fails, the wake-up
// was merely spurious.
func (b *Node) ReleaseHandoff(ctx context.Context, key, owner string, handoff func()) error {
	return b.release(ctx, key, owner, b.id, handoff)
}

// release deletes owner's lock on key and publishes the release, if someone
// waited lately, under id; ordered is the Runner's.
func (b *Node) release(ctx context.Context, key, owner, id string, ordered func()) error {
	lk := LockKey(b.prefix, key)
	n, err := b.exec.Run(ctx, ordered, releaseScript, []string{lk, lk + ":waiters"}, owner, b.channel, id).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return errNotHeld
	}
	// Unpublished: no other Locker's waiter marked the key, so there are no
	// odds to even, and this Locker's waiters, which never mark a key its
	// own lease holds, are woken now, not by a message. (A handed-off
	// release has woken its waiter already.)
	if n == 1 && id == anonymous {
		b.w.released(key)
	}
	return nil
}

// ReleaseHandover implements driver.HandoverReleaser.
func (b *Node) ReleaseHandover(ctx context.Context, key, owner, next string, ttl time.Duration) (uint64, error) {
	ks := lockKeys(b.prefix, key)
	v, err := b.exec.Run(ctx, nil, releaseHandoverScript, ks[:], owner, next, ttlArg(ttl), b.retentionArg, b.channel, anonymous).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("redislock: %w", err)
	case v == 0:
		return 0, errNotHeld
	case v < 0:
		return 0, nil
	}
	return uint64(v), nil
}

// WatchReleaseFunc watches key for releases on behalf of no particular
// owner, for a backend that watches several Nodes for one Acquire
// (lock/redlock): a release seen here calls notify, which must not block and
// must not call back into the Node, instead of sending on a channel of the
// watch's own. It does not wait for the Node's subscription: when that is
// not confirmed yet, subscribing is a channel closed when its state next
// changes, so the caller can wait for every Node at once (as
// WatchRelease waits, up to a second, for its own). stop ends the
// watch; it must be called exactly once.
func (b *Node) WatchReleaseFunc(key string, notify func()) (subscribing <-chan struct{}, stop func(), err error) {
	wt := &waiter{key: key, notify: notify}
	subscribing, err = b.w.join(wt)
	if err != nil {
		return nil, nil, err
	}
	return subscribing, func() { b.w.leave(wt) }, nil
}

// WatchRelease implements driver.ReleaseWatcher.
func (b *Node) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return b.w.watch(ctx, key)
}

// errNotHeld is the answer of a renewal or release that found the lock not
// ours: absent or another owner's (Redis cannot tell which).
var errNotHeld = lockerr.NotHeld("redislock: the lock expired or another owner holds it")

// errClosed is returned by calls made after Close.
var errClosed = errors.New("redislock: locker closed")

// isNil reports a nil client, also a nil pointer of go-redis's client types
// inside the interface.
func isNil(c Client) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// newInstanceID returns 64 random bits, hex-encoded: 16 bytes.
func newInstanceID() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// millis rounds d up to whole milliseconds, so the server never keeps a lock
// for less than the holder was promised.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
