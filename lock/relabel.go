package lock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"

	"github.com/latchkey-go/latchkey/lock/driver"
)

// SetHolder replaces the lease's holder label (WithHolder) on the server
// while it keeps the lock: inspection and Holder show label from then on.
// The rules of WithHolder apply to label. Setting the label the lease has
// already changes nothing and touches no server.
//
// Errors: one wrapping ErrInvalid for a bad label (no server is touched),
// ErrUnsupported if the backend cannot change a stored label, ErrReleased
// after Release, an error wrapping ErrNotHeld and ErrLeaseLost if the lease
// was lost or the server says the lock is no longer ours (Done then closes),
// ctx's error, or the backend's. After a backend error the label may or may
// not have changed on the server; if it did, the lease's next renewal is
// refused and the lease is lost, which is safe: no two holders, only an
// early end.
//
// SetHolder calls of one lease run one at a time, each after the renewal in
// flight, if any; no renewal runs while SetHolder talks to the server.
func (l *Lease) SetHolder(ctx context.Context, label string) error {
	if err := validateHolder(label); err != nil {
		return err
	}
	m := l.m
	rl, ok := m.backend.(driver.Relabeler)
	if !ok {
		return fmt.Errorf("%w: changing the holder label", ErrUnsupported)
	}
	l.relabel.Lock()
	defer l.relabel.Unlock()

	m.mu.Lock()
	for {
		if err := l.endedLocked(); err != nil {
			return err
		}
		if l.holder == label {
			// Nothing to change; the lease is held by our clock.
			m.mu.Unlock()
			return nil
		}
		if !l.renewing {
			break
		}
		if l.settled == nil {
			l.settled = make(chan struct{})
		}
		settled := l.settled
		m.mu.Unlock()
		select {
		case <-settled:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
	}
	// Keep the scheduler from renewing with the owner we are replacing; the
	// deadline still stands, as for a renewal in flight.
	l.renewing = true
	heap.Fix(&m.heap, l.index)
	owner := l.owner
	m.mu.Unlock()

	id, _, _ := ParseOwner(owner)
	newOwner := id
	if label != "" {
		newOwner += " " + label
	}
	err := rl.Relabel(ctx, l.key, owner, newOwner)

	m.mu.Lock()
	if l.err != nil { // released or lost meanwhile
		lerr := l.err
		m.mu.Unlock()
		if lerr == ErrReleased {
			return lerr
		}
		return notHeldError{lerr}
	}
	l.renewing = false
	l.settleLocked()
	switch {
	case err == nil:
		l.owner, l.holder = newOwner, label
	case errors.Is(err, ErrNotHeld):
		lost := leaseLost("holder label change refused", err)
		cleanup := m.loseLocked(l, lost)
		m.mu.Unlock()
		cleanup()
		return notHeldError{lost}
	}
	heap.Fix(&m.heap, l.index)
	m.kickLocked()
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lock: set holder: %w", err)
	}
	return nil
}

// settleLocked wakes the SetHolder calls waiting for the renewal in flight
// to end. Call with m.mu held.
func (l *Lease) settleLocked() {
	if l.settled != nil {
		close(l.settled)
		l.settled = nil
	}
}
