package redislock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/lock"
)

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// waitersFlagTTL is how long a failed attempt marks a key as waited for, so
// that its releases publish a wake-up. A waiting Acquire attempts again at
// least once a second (the Manager's safety-net poll), renewing the mark, so
// the mark outlives the wait; once nobody waits, releases stop publishing.
const waitersFlagTTL = 10 * time.Second

// backend implements lock.Backend, lock.BatchRenewer, lock.ReleaseWatcher
// and lock.HandoffReleaser.
type backend struct {
	client    Client
	prefix    string
	channel   string // where releases of waited-for keys are published
	id        string // this Locker's instance id, in its release messages
	retention int64  // fencing counter retention, ms
	exec      redisbatch.Runner
	w         *watcher
}

var (
	_ lock.Backend         = (*backend)(nil)
	_ lock.BatchRenewer    = (*backend)(nil)
	_ lock.ReleaseWatcher  = (*backend)(nil)
	_ lock.HandoffReleaser = (*backend)(nil)
)

func newBackend(client Client, o options) *backend {
	b := &backend{
		client:    client,
		prefix:    o.prefix,
		channel:   o.prefix + "released",
		id:        newInstanceID(),
		retention: millis(o.retention),
	}
	if o.batching {
		b.exec = redisbatch.NewSends(client, o.sends)
	} else {
		b.exec = redisbatch.Direct{C: client}
	}
	b.w = newWatcher(b)
	return b
}

func (b *backend) close() { b.w.close() }

// TryAcquire implements lock.Backend.
func (b *backend) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	lk := lockKey(b.prefix, key)
	n, err := b.exec.Run(ctx, nil, acquireScript, []string{lk, lk + ":fence", lk + ":waiters"},
		owner, millis(ttl), b.retention, millis(waitersFlagTTL)).Int64()
	if err != nil {
		return 0, 0, fmt.Errorf("redislock: %w", err)
	}
	if n <= 0 {
		return 0, time.Duration(-n) * time.Millisecond, lock.ErrNotAcquired
	}
	return uint64(n), 0, nil
}

// Renew implements lock.Backend.
func (b *backend) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	n, err := b.exec.Run(ctx, nil, renewScript, []string{lockKey(b.prefix, key)}, owner, millis(ttl)).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

// RenewBatch implements lock.BatchRenewer: one pipeline for the whole batch
// (on Redis Cluster, one per master, sent in parallel).
func (b *backend) RenewBatch(ctx context.Context, batch []lock.Renewal) []error {
	errs := make([]error, len(batch))
	if len(batch) == 0 {
		return errs
	}
	cmds := make([]*redis.Cmd, len(batch))
	send := func(idx []int) error {
		pipe := b.client.Pipeline()
		for _, i := range idx {
			r := batch[i]
			cmds[i] = renewScript.EvalSha(ctx, pipe, []string{lockKey(b.prefix, r.Key)}, r.Owner, millis(r.TTL))
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
		for i, c := range cmds {
			if redisbatch.IsNoScript(c.Err()) {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			if err := renewScript.Load(ctx, b.client).Err(); err == nil {
				_ = send(missing)
			}
		}
	}
	for i, c := range cmds {
		n, err := c.Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redislock: %w", err)
		case n != 1:
			errs[i] = errNotHeld
		}
	}
	return errs
}

// anonymous stands for the releasing Locker's id in the message of a
// Release: it is no Locker's (ids are hex), so every Locker's waiters hear
// it, the releasing one's included.
const anonymous = "----------------"

// Release implements lock.Backend.
func (b *backend) Release(ctx context.Context, key, owner string) error {
	return b.release(ctx, key, owner, anonymous, nil)
}

// ReleaseHandoff implements lock.HandoffReleaser: handoff runs as soon as
// an attempt is sure to reach Redis after this release, so with batching
// both travel in one round trip. The release message carries this Locker's
// id, which its own subscription skips. If the release fails, the wake-up
// was merely spurious.
func (b *backend) ReleaseHandoff(ctx context.Context, key, owner string, handoff func()) error {
	return b.release(ctx, key, owner, b.id, handoff)
}

// release deletes owner's lock on key and publishes the release, if someone
// waited lately, under id; ordered is the Runner's.
func (b *backend) release(ctx context.Context, key, owner, id string, ordered func()) error {
	lk := lockKey(b.prefix, key)
	n, err := b.exec.Run(ctx, ordered, releaseScript, []string{lk, lk + ":waiters"}, owner, b.channel, id).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
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
func (b *backend) WatchReleaseFunc(key string, notify func()) (subscribing <-chan struct{}, stop func(), err error) {
	wt := &waiter{key: key, notify: notify}
	subscribing, err = b.w.join(wt)
	if err != nil {
		return nil, nil, err
	}
	return subscribing, func() { b.w.leave(wt) }, nil
}

// WatchRelease implements lock.ReleaseWatcher.
func (b *backend) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return b.w.watch(ctx, key)
}

// errNotHeld is the answer of a renewal or release that found the lock not
// ours: absent or another owner's (Redis cannot tell which).
var errNotHeld = lockerr.NotHeld("redislock: the lock expired or another owner holds it")

// errClosed is returned by calls made after Close.
var errClosed = errors.New("redislock: locker closed")
