package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	//go:embed raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)
)

// backend implements driver.Backend, driver.BatchRenewer, driver.ReleaseWatcher
// and driver.PipelinedReleaser by running redislock's per-server backend on
// every node and counting.
type backend struct {
	nodes     []*redisnode.Node
	raisers   []redisbatch.Runner // raisers[i] runs the write-back on nodes[i]'s client
	quorum    int
	timeout   time.Duration // per node call; 0: from the TTL
	retention int64         // fencing counter retention, ms
	crew      crew          // goroutines for the nodes' calls
}

var (
	_ driver.Backend           = (*backend)(nil)
	_ driver.BatchRenewer      = (*backend)(nil)
	_ driver.ReleaseWatcher    = (*backend)(nil)
	_ driver.PipelinedReleaser = (*backend)(nil)
)

func (b *backend) close() {
	for _, n := range b.nodes {
		_ = n.Close()
	}
	b.crew.close()
}

// nodeTimeout bounds one call to one node for a lease of ttl.
func (b *backend) nodeTimeout(ttl time.Duration) time.Duration {
	if b.timeout > 0 {
		return b.timeout
	}
	return min(ttl/10, MaxNodeTimeout)
}

// each calls f for every node at once, under timeout (one deadline for all,
// as they start together), and returns their errors in node order: see
// eachNode.
func (b *backend) each(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int) error) []error {
	_, errs := eachNode(ctx, b, timeout, func(ctx context.Context, i int) (struct{}, error) {
		return struct{}{}, f(ctx, i)
	})
	return errs
}

// A nodeAnswer is one node's answer in a round of eachNode.
type nodeAnswer[T any] struct {
	i   int
	v   T
	err error
}

// eachNode calls f for every node at once on the crew's goroutines, under
// timeout, and returns their values and errors in node order once all have
// answered or the deadline has passed, whichever comes first. A node that has
// not answered by then gets an error wrapping the context's and the zero
// value; its call goes on in the background and its late answer is dropped.
// So a silent node (a partition, a client that does not honour context
// deadlines, as go-redis's default options do not) costs a round the
// per-node timeout, never its client's own read timeout and retries.
func eachNode[T any](ctx context.Context, b *backend, timeout time.Duration, f func(ctx context.Context, i int) (T, error)) ([]T, []error) {
	n := len(b.nodes)
	vals, errs := make([]T, n), make([]error, n)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answers := make(chan nodeAnswer[T], n) // buffered: a late call never blocks
	for i := range n {
		b.crew.run(func() {
			v, err := f(ctx, i)
			answers <- nodeAnswer[T]{i, v, err}
		})
	}
	answered := make([]bool, n)
	collect := func(a nodeAnswer[T]) {
		vals[a.i], errs[a.i], answered[a.i] = a.v, a.err, true
	}
	for left := n; left > 0; left-- {
		select {
		case a := <-answers:
			collect(a)
		case <-ctx.Done():
			for more := true; more; { // answers that came with the deadline count
				select {
				case a := <-answers:
					collect(a)
				default:
					more = false
				}
			}
			for i := range n {
				if !answered[i] {
					errs[i] = fmt.Errorf("redlock: node %d did not answer within %v: %w", i, timeout, context.Cause(ctx))
				}
			}
			return vals, errs
		}
	}
	return vals, errs
}

// TryAcquire implements driver.Backend: SET NX on every node at once, the
// choice of the token among the quorum's and, only where the nodes' counters
// do not already fence it, its write-back (see the package doc). It succeeds
// only if a quorum was taken, the token is fenced, and less than TTL - drift
// has passed; otherwise it gives back every node it may have taken before
// returning.
func (b *backend) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	start := time.Now()
	a := attempt{key: key, owner: owner, ttl: ttl, timeout: b.nodeTimeout(ttl), quorum: b.quorum}
	b.take(ctx, &a)
	token, fenced := b.fence(ctx, &a)
	elapsed := time.Since(start)
	if fenced && elapsed < ttl-lock.DriftMargin(ttl) {
		return token, 0, nil
	}
	b.giveBack(ctx, key, owner, a.set)
	if fenced {
		return 0, 0, fmt.Errorf("redlock: the attempt took %v, leaving no validity of the %v TTL", elapsed, ttl)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if err := a.unreachable(); err != nil {
		return 0, 0, err
	}
	return 0, a.shortestHold(), lock.ErrNotAcquired
}

// take runs SET NX on every node at once and records their answers in a:
// afterwards a.set[i] is nil exactly where node i took the key for us.
func (b *backend) take(ctx context.Context, a *attempt) {
	key, owner, ttl := a.key, a.owner, a.ttl
	type taken struct {
		token uint64
		hold  time.Duration
	}
	vals, errs := eachNode(ctx, b, a.timeout, func(ctx context.Context, i int) (taken, error) {
		token, hold, err := b.nodes[i].TryAcquire(ctx, key, owner, ttl)
		return taken{token, hold}, err
	})
	a.set = errs
	a.tokens = make([]uint64, len(vals))
	a.holds = make([]time.Duration, len(vals))
	for i, v := range vals {
		a.tokens[i], a.holds[i] = v.token, v.hold
	}
}

// fence chooses a's token and, when too few nodes' counters are at it
// already, writes it back to the nodes taken below it. It reports true only
// if a quorum of nodes still holds our lock with the token the quorum-th
// smallest of theirs, and N-Q+1 of them have counters at or above it: the two
// sets the proof in docs/redlock-internals.md rests on.
func (b *backend) fence(ctx context.Context, a *attempt) (uint64, bool) {
	token, ok := a.choose()
	if !ok {
		return 0, false
	}
	if a.enough(a.fenced(token)) {
		return token, true
	}
	b.raiseAll(ctx, a, token)
	// A node whose raise found our lock gone (a restart) no longer counts
	// as taken, which may break the choice.
	again, ok := a.choose()
	return token, ok && again == token && a.enough(a.fenced(token))
}

// raiseAll writes token back, at once, to every node that took the key for
// us with a token below it, and records their answers in a.raised: nil where
// the node's counter is now at least token, errSkipped where not asked.
func (b *backend) raiseAll(ctx context.Context, a *attempt, token uint64) {
	key, owner, set, tokens := a.key, a.owner, a.set, a.tokens
	a.raised = b.each(ctx, a.timeout, func(ctx context.Context, i int) error {
		if set[i] != nil || tokens[i] >= token {
			return errSkipped
		}
		return b.raise(ctx, i, key, owner, token)
	})
}

// raise runs the write-back on node i.
func (b *backend) raise(ctx context.Context, i int, key, owner string, token uint64) error {
	lk, fk := b.nodes[i].Keys(key)
	n, err := b.raisers[i].Run(ctx, nil, raiseScript, []string{lk, fk}, owner, strconv.FormatUint(token, 10), b.retention).Int64()
	if err != nil {
		return fmt.Errorf("redlock: raise token: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("redlock: raise token: %w", lock.ErrNotHeld)
	}
	return nil
}

// giveBack undoes a failed attempt on every node that may have been taken
// (all but those whose answer in set says another owner holds the key). It
// shortens our
// lock there to 1 ms with the compare-and-pexpire of renewal instead of
// deleting it with the compare-and-delete of release: the effect is the same
// (only our own lock is touched), but release would wake this Locker's
// waiters, the attempting one included, which would then retry at once, in a
// loop, for as long as the holder keeps its quorum.
func (b *backend) giveBack(ctx context.Context, key, owner string, set []error) {
	ctx = context.WithoutCancel(ctx)
	b.each(ctx, b.nodeTimeout(lock.MaxTTL), func(ctx context.Context, i int) error {
		if errors.Is(set[i], lock.ErrNotAcquired) {
			return nil
		}
		return b.nodes[i].Renew(ctx, key, owner, time.Millisecond)
	})
}

// verdict turns the nodes' answers to a renewal or release into one: nil with
// a quorum of successes, an error wrapping lock.ErrNotHeld when so many nodes
// answered that the lock is not ours that no quorum is left, else the first
// failure (transient: the Manager retries renewals until the local deadline).
func (b *backend) verdict(errs []error) error {
	var ok, notHeld int
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, lock.ErrNotHeld):
			notHeld++
		case first == nil:
			first = err
		}
	}
	n := len(errs)
	switch {
	case ok >= b.quorum:
		return nil
	case notHeld > n-b.quorum:
		return lockerr.NotHeld(fmt.Sprintf("redlock: %d of %d nodes do not hold the lock, quorum is %d", notHeld, n, b.quorum))
	default:
		return fmt.Errorf("redlock: %d of %d nodes confirmed, quorum is %d: %w", ok, n, b.quorum, first)
	}
}

// Renew implements driver.Backend.
func (b *backend) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	return b.verdict(b.each(ctx, b.nodeTimeout(ttl), func(ctx context.Context, i int) error {
		return b.nodes[i].Renew(ctx, key, owner, ttl)
	}))
}

// RenewBatch implements driver.BatchRenewer: one pipeline per node, all nodes
// at once, then a quorum per lease.
func (b *backend) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	out := make([]error, len(batch))
	if len(batch) == 0 {
		return out
	}
	shortest := batch[0].TTL
	for _, r := range batch[1:] {
		shortest = min(shortest, r.TTL)
	}
	per, silent := eachNode(ctx, b, b.nodeTimeout(shortest), func(ctx context.Context, i int) ([]error, error) {
		return b.nodes[i].RenewBatch(ctx, batch), nil
	})
	col := make([]error, len(b.nodes))
	for j := range batch {
		for i, errs := range per {
			switch {
			case silent[i] != nil:
				col[i] = silent[i]
			case j < len(errs):
				col[i] = errs[j]
			default:
				col[i] = errors.New("redlock: node returned too few renewal results")
			}
		}
		out[j] = b.verdict(col)
	}
	return out
}

// Release implements driver.Backend: compare-and-delete on every node, each
// of which publishes the release to every Locker's waiters.
func (b *backend) Release(ctx context.Context, key, owner string) error {
	return b.verdict(b.each(ctx, b.nodeTimeout(lock.MaxTTL), func(ctx context.Context, i int) error {
		return b.nodes[i].Release(ctx, key, owner)
	}))
}

// ReleaseHandoff implements driver.PipelinedReleaser: compare-and-delete on
// every node, whose release messages this Locker's own watches skip, then
// handoff. So the waiter of this Locker that handoff wakes attempts once
// every node has answered, and finds every node free, instead of a first
// node's message setting it off while others still hold the old lock.
func (b *backend) ReleaseHandoff(ctx context.Context, key, owner string, handoff func()) error {
	err := b.verdict(b.each(ctx, b.nodeTimeout(lock.MaxTTL), func(ctx context.Context, i int) error {
		return b.nodes[i].ReleaseHandoff(ctx, key, owner, func() {})
	}))
	handoff()
	return err
}

// subscribeWait bounds how long the first waiting Acquire of a Locker waits
// for the nodes' subscriptions to be confirmed, as redislock's does for its
// one.
const subscribeWait = time.Second

// WatchRelease implements driver.ReleaseWatcher: it watches key on every node
// (each node's release messages): a release seen on any node wakes the
// returned channel. Nodes that cannot watch are left out; the Manager's poll
// covers them. It starts no goroutine: the nodes wake the channel from their
// own.
func (b *backend) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	wake := waitq.NewWake()
	stops := make([]func(), 0, len(b.nodes))
	var subscribing []<-chan struct{}
	for _, n := range b.nodes {
		sub, stop, err := n.WatchReleaseFunc(key, wake.Signal)
		if err != nil {
			continue
		}
		stops = append(stops, stop)
		if sub != nil {
			subscribing = append(subscribing, sub)
		}
	}
	if len(stops) == 0 {
		return nil, nil, errNoWatch
	}
	if len(subscribing) > 0 {
		// The first watch of a node starts its subscription: wait for
		// all of them at once, so no release after the first attempt
		// goes unheard.
		t := time.NewTimer(subscribeWait)
	wait:
		for _, sub := range subscribing {
			select {
			case <-sub:
			case <-ctx.Done():
				break wait
			case <-t.C:
				break wait
			}
		}
		t.Stop()
	}
	return wake, func() {
		for _, stop := range stops {
			stop()
		}
	}, nil
}
