package lock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"
)

// Extend makes a fixed-TTL lease (WithFixedTTL) last ttl from now, as
// bsm/redislock's Refresh and redsync's Extend do: the server's lock is set
// to expire ttl after it receives the request, and only once the server has
// confirmed it does the local deadline move, to the moment Extend was called
// plus ttl minus DriftMargin(ttl). A shorter ttl than what is left shortens
// the lease. TTL keeps returning the length the lock was taken with.
//
// A renewed lease is extended by its renewals, every TTL/3; Extend refuses
// it with an error wrapping ErrInvalid. Errors:
//   - ErrInvalid (wrapped) for a ttl outside [MinTTL, MaxTTL] or a renewed
//     lease; nothing is changed and no server is touched. A backend whose
//     server bounds lease lengths by its own (ZooKeeper's session timeout,
//     the etcd lease granted when the lock was taken) refuses a longer ttl
//     the same way.
//   - ErrReleased if the lease was released.
//   - an error wrapping ErrNotHeld and ErrLeaseLost if the lease had been lost
//     or the server says the lock is no longer ours (the lease is then lost:
//     Done closes).
//   - the backend's error otherwise (the server could not be reached): the
//     lease keeps its deadline, and Extend may be called again before it.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: TTL %v outside [%v, %v]", ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	if !l.fixed {
		return fmt.Errorf("%w: a renewed lease is extended by its renewals; Extend is for leases taken WithFixedTTL", ErrInvalid)
	}
	m := l.m
	m.mu.Lock()
	if err := l.endedLocked(); err != nil {
		return err
	}
	owner := l.owner
	m.mu.Unlock()

	sent := time.Now()
	valid, err := m.renewOne(ctx, l.key, owner, ttl)

	m.mu.Lock()
	switch {
	case l.err != nil: // released or lost meanwhile
		lerr := l.err
		m.mu.Unlock()
		if lerr == ErrReleased {
			return lerr
		}
		return notHeldError{lerr}
	case err == nil:
		l.deadline = sent.Add(valid - DriftMargin(valid))
		heap.Fix(&m.heap, l.index)
		m.kickLocked() // the deadline may have come closer
		m.mu.Unlock()
		return nil
	case errors.Is(err, ErrNotHeld):
		lost := leaseLost("extension refused", err)
		cleanup := m.loseLocked(l, lost)
		m.mu.Unlock()
		cleanup()
		return notHeldError{lost}
	}
	m.mu.Unlock()
	return fmt.Errorf("lock: extend: %w", err)
}
