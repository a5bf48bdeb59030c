package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

var (
	//go:embed raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)
)

// backend implements lock.Backend, lock.BatchRenewer and lock.ReleaseWatcher
// by running redislock's per-server backend on every node and counting.
type backend struct {
	nodes     []*redislock.Node
	raisers   []redisbatch.Runner // raisers[i] runs the write-back on nodes[i]'s client
	quorum    int
	timeout   time.Duration // per node call; 0: from the TTL
	retention int64         // fencing counter retention, ms
	local     *localQueues  // this Locker's waiters, per key
	crew      crew          // goroutines for the nodes' calls
}

var (
	_ lock.Backend      = (*backend)(nil)
	_ lock.BatchRenewer = (*backend)(nil)
	_ lock.OwnerWatcher = (*backend)(nil)
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
// as they start together), and returns their errors in node order once all
// have returned. The last node's call runs on the caller's goroutine, the
// others on the crew's.
func (b *backend) each(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int) error) []error {
	errs := make([]error, len(b.nodes))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := func(i int) { errs[i] = f(ctx, i) }
	last := len(b.nodes) - 1
	var wg sync.WaitGroup
	wg.Add(last)
	for i := range last {
		b.crew.run(func() {
			defer wg.Done()
			call(i)
		})
	}
	call(last)
	wg.Wait()
	return errs
}

// errSkipped marks a node left out of a round.
var errSkipped = errors.New("redlock: node not in this round")

// TryAcquire implements lock.Backend: SET NX on every node at once, the
// choice of the token among the quorum's and, only where the nodes' counters
// do not already fence it, its write-back (see the package doc). It succeeds
// only if a quorum was taken, the token is fenced, and less than TTL - drift
// has passed; otherwise it gives back every node it may have taken before
// returning.
func (b *backend) TryAcquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	if b.local.behind(key, owner) {
		// A waiter of this Locker has waited longer: it goes first.
		return 0, 0, lock.ErrNotAcquired
	}
	start := time.Now()
	timeout := b.nodeTimeout(ttl)
	n := len(b.nodes)
	tokens := make([]uint64, n)
	holds := make([]time.Duration, n)
	errs := b.each(ctx, timeout, func(ctx context.Context, i int) error {
		var err error
		tokens[i], holds[i], err = b.nodes[i].TryAcquire(ctx, key, owner, ttl)
		return err
	})
	var taken, held int
	var holderTTL time.Duration
	for i, err := range errs {
		switch {
		case err == nil:
			taken++
		case errors.Is(err, lock.ErrNotAcquired):
			held++
			if h := holds[i]; h > 0 && (holderTTL == 0 || h < holderTTL) {
				holderTTL = h
			}
		}
	}
	if taken >= b.quorum {
		token, fenced := b.choose(tokens, errs)
		if fenced < n-b.quorum+1 {
			// Too few nodes' counters are at the token already: raise
			// the counters of the nodes taken below it.
			raised := b.each(ctx, timeout, func(ctx context.Context, i int) error {
				if errs[i] != nil || tokens[i] >= token {
					return errSkipped
				}
				return b.raise(ctx, i, key, owner, token)
			})
			for i, err := range raised {
				switch {
				case err == nil:
					fenced++
				case errors.Is(err, lock.ErrNotHeld):
					// The node lost our lock (a restart): it is no
					// longer taken, which may break the choice.
					errs[i] = err
					taken--
				}
			}
			if taken >= b.quorum {
				if t, _ := b.choose(tokens, errs); t > token {
					fenced = 0 // the token no longer has a quorum at or below it
				}
			}
			for i, err := range raised {
				if err != nil && !errors.Is(err, errSkipped) {
					// Not fenced there; still taken, its key lives
					// (kept for the failure report and the give-back).
					errs[i] = err
				}
			}
		}
		elapsed := time.Since(start)
		if taken >= b.quorum && fenced >= n-b.quorum+1 && elapsed < ttl-lock.DriftMargin(ttl) {
			b.local.acquired(key, owner)
			return token, 0, nil
		}
		b.giveBack(ctx, key, owner, errs)
		if taken >= b.quorum && fenced >= n-b.quorum+1 {
			return 0, 0, fmt.Errorf("redlock: the attempt took %v, leaving no validity of the %v TTL", elapsed, ttl)
		}
	} else {
		b.giveBack(ctx, key, owner, errs)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if held <= n-b.quorum {
		// Not held by anyone on a quorum: count the failures.
		var failed int
		var first error
		for _, err := range errs {
			if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
				failed++
				if first == nil {
					first = err
				}
			}
		}
		if failed > n-b.quorum {
			return 0, 0, fmt.Errorf("redlock: %d of %d nodes failed, quorum is %d: %w", failed, n, b.quorum, first)
		}
	}
	return 0, holderTTL, lock.ErrNotAcquired
}

// choose returns the token of an acquisition from the tokens of the nodes
// taken (errs[i] == nil): the quorum-th smallest, the least value that a
// quorum of them issued at or below. It also returns how many of them issued
// at least that value, whose counters therefore already fence it.
func (b *backend) choose(tokens []uint64, errs []error) (token uint64, fenced int) {
	var buf [16]uint64
	vals := buf[:0]
	for i, err := range errs {
		if err == nil {
			vals = append(vals, tokens[i])
		}
	}
	slices.Sort(vals)
	token = vals[b.quorum-1]
	for _, v := range vals {
		if v >= token {
			fenced++
		}
	}
	return token, fenced
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
// (all but those that said another owner holds the key). It shortens our
// lock there to 1 ms with the compare-and-pexpire of renewal instead of
// deleting it with the compare-and-delete of release: the effect is the same
// (only our own lock is touched), but release would wake this Locker's
// waiters, the attempting one included, which would then retry at once, in a
// loop, for as long as the holder keeps its quorum.
func (b *backend) giveBack(ctx context.Context, key, owner string, errs []error) {
	ctx = context.WithoutCancel(ctx)
	b.each(ctx, b.nodeTimeout(lock.MaxTTL), func(ctx context.Context, i int) error {
		if errors.Is(errs[i], lock.ErrNotAcquired) {
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

// Renew implements lock.Backend.
func (b *backend) Renew(ctx context.Context, key, owner string, ttl time.Duration) error {
	return b.verdict(b.each(ctx, b.nodeTimeout(ttl), func(ctx context.Context, i int) error {
		return b.nodes[i].Renew(ctx, key, owner, ttl)
	}))
}

// RenewBatch implements lock.BatchRenewer: one pipeline per node, all nodes
// at once, then a quorum per lease.
func (b *backend) RenewBatch(ctx context.Context, batch []lock.Renewal) []error {
	out := make([]error, len(batch))
	if len(batch) == 0 {
		return out
	}
	shortest := batch[0].TTL
	for _, r := range batch[1:] {
		shortest = min(shortest, r.TTL)
	}
	per := make([][]error, len(b.nodes))
	b.each(ctx, b.nodeTimeout(shortest), func(ctx context.Context, i int) error {
		per[i] = b.nodes[i].RenewBatch(ctx, batch)
		return nil
	})
	col := make([]error, len(b.nodes))
	for j := range batch {
		for i, errs := range per {
			if j < len(errs) {
				col[i] = errs[j]
			} else {
				col[i] = errors.New("redlock: node returned too few renewal results")
			}
		}
		out[j] = b.verdict(col)
	}
	return out
}

// Release implements lock.Backend: compare-and-delete on every node, then a
// wake-up for this Locker's longest waiter on key, whose attempt therefore
// finds every node released.
func (b *backend) Release(ctx context.Context, key, owner string) error {
	err := b.verdict(b.each(ctx, b.nodeTimeout(lock.MaxTTL), func(ctx context.Context, i int) error {
		return b.nodes[i].Release(ctx, key, owner)
	}))
	b.local.released(key)
	return err
}

// subscribeWait bounds how long the first waiting Acquire of a Locker waits
// for the nodes' subscriptions to be confirmed, as redislock's does for its
// one.
const subscribeWait = time.Second

// watch watches key on every node (each node's release messages and this
// Locker's own releases there): a release seen on any node calls deliver
// with the returned channel, which the caller may also send on. Nodes that
// cannot watch are left out; the Manager's poll covers them. It starts no
// goroutine: the nodes call deliver from their own.
func (b *backend) watch(ctx context.Context, key string, deliver func(wake chan struct{})) (chan struct{}, func(), error) {
	wake := make(chan struct{}, 1)
	notify := func() { deliver(wake) }
	stops := make([]func(), 0, len(b.nodes))
	var subscribing []<-chan struct{}
	for _, n := range b.nodes {
		sub, stop, err := n.WatchReleaseFunc(key, notify)
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
