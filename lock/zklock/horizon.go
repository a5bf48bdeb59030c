package zklock

import (
	"context"
	"sync"
	"time"
)

// In an ensemble, the server a session is connected to (a follower, say)
// answers its reads from its own copy, but only the leader expires sessions.
// The leader counts a session's timeout from the last time it heard of it:
// at the handshake (the leader creates or revalidates the session), and then
// from the follower's answers to the leader's pings, every half tick, which
// list the sessions that sent the follower anything since the last one. A
// follower cut off from the leader keeps answering for up to syncLimit
// ticks, so an answer from it proves nothing about the leader's count: a
// renewal confirmed by it alone would move the holder's deadline past the
// moment the leader expires the session and deletes the node.
//
// The horizon is the bound this package holds leases to instead. A request
// sent at t and answered reached the follower after t. A later Sync, sent
// at s at least [gap] after t and answered, went through the leader, which
// had by then read everything the follower sent before it: a ping answer
// sent after the request arrived (pings come every half tick; gap allows
// three quarters). So the leader heard of the session after t and expires
// it no earlier than t plus the session timeout: t is proven. A lease is
// certainly held until the latest proven time plus the session timeout (less
// the drift over that span), and never longer than its TTL from its
// renewal. A heartbeat (a Sync of the root every quarter tick) keeps the
// proof fresh; cut off from the leader, its Syncs go unanswered and every
// lease of the session runs out by that bound, before the leader can expire
// the session.

// DefaultTickTime is the servers' tickTime assumed unless WithTickTime is
// given, ZooKeeper's own default; it is also capped at half the session
// timeout the server granted, which a server's minSessionTimeout (two ticks
// by default) guarantees.
const DefaultTickTime = 2 * time.Second

// horizon keeps the proof of when the leader last heard of the session.
type horizon struct {
	mu      sync.Mutex
	proven  time.Time   // the leader heard of the session after this
	touches []time.Time // send times of answered requests not yet proven, oldest first
}

// maxTouches bounds the unproven touches kept: one every quarter tick (the
// heartbeat's) is enough, so closer ones are not kept.
const maxTouches = 64

// handshake records a session handshake begun at begun: the leader created
// or revalidated the session after it.
func (h *horizon) handshake(begun time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if begun.After(h.proven) {
		h.proven = begun
	}
	h.touches = h.touches[:0]
}

// touched records a request sent at sent and answered.
func (h *horizon) touched(sent time.Time, gap time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.touches); n > 0 && sent.Sub(h.touches[n-1]) < gap/4 {
		return // the earlier one proves as much, sooner
	}
	if len(h.touches) == maxTouches {
		h.touches = append(h.touches[:0], h.touches[1:]...)
	}
	h.touches = append(h.touches, sent)
}

// synced records a Sync sent at sent and answered: every touch sent at
// least gap before it is proven.
func (h *horizon) synced(sent time.Time, gap time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for ; i < len(h.touches) && !h.touches[i].After(sent.Add(-gap)); i++ {
		if h.touches[i].After(h.proven) {
			h.proven = h.touches[i]
		}
	}
	h.touches = append(h.touches[:0], h.touches[i:]...)
}

// valid returns how long from sent a lease of ttl is certainly held on a
// session of timeout st: until the proven time plus st, less the drift
// over that span (lock.DriftMargin of valid, which the Manager takes, and
// 1% of the time from the proof to sent), at most ttl; 0 if not at all.
func (h *horizon) valid(sent time.Time, ttl, st time.Duration) time.Duration {
	h.mu.Lock()
	proven := h.proven
	h.mu.Unlock()
	if proven.IsZero() {
		return 0
	}
	before := sent.Sub(proven)
	return max(min(ttl, st-before-before/100), 0)
}

// certain returns how long from sent a hold of ttl that a call sent then
// confirmed is certainly held: up to the session's horizon. Every kind's
// acquisition and renewal (lock, read-write lock, semaphore) vouches this
// much.
func (b *backend) certain(sent time.Time, ttl time.Duration) time.Duration {
	return b.horizon.valid(sent, ttl, b.sessionTimeout())
}

// heartbeat Syncs the root every quarter tick while the Locker is open, so
// that the horizon keeps up with time while the leader can be reached.
func (b *backend) heartbeat(stop <-chan struct{}) {
	defer b.sweeps.Done()
	for {
		tick := b.tick()
		select {
		case <-stop:
			return
		case <-time.After(tick / 4):
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.sessionTimeout())
		sent := time.Now()
		if _, err := call(ctx, b, func() (string, error) { return b.conn.Sync("/") }); err == nil {
			b.horizon.synced(sent, b.gap())
		}
		cancel()
	}
}

// tick returns the servers' tick as this Locker assumes it: WithTickTime's,
// or DefaultTickTime, at most half the session timeout granted.
func (b *backend) tick() time.Duration {
	t := b.tickTime
	if t <= 0 {
		t = DefaultTickTime
	}
	return max(min(t, b.sessionTimeout()/2), time.Millisecond)
}

// gap is how long before an answered Sync a request must have been sent for
// the Sync to prove the leader heard of it: the half tick between pings,
// and a quarter tick more for the follower's own delays.
func (b *backend) gap() time.Duration { return 3 * b.tick() / 4 }
