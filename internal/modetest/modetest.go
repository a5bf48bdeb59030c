// Package modetest checks that one name is one resource on a backend: a
// lock, an election's term, a read-write lock and a semaphore of one name
// exclude each other, and an acquisition in one mode while another mode
// holds the name is refused at once with a *lock.ModeError naming that mode.
// Every backend that offers more than one mode runs it against a real
// server.
package modetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// Harness opens one backend's primitives; each call is a new client, as
// another process would have. Key returns a name unique to the test. RW is
// nil where the backend has no read-write locks.
type Harness struct {
	Lock      func(t *testing.T) lock.Locker
	RW        func(t *testing.T) *rwlock.Locker
	Semaphore func(t *testing.T) *semaphore.Client
	Key       func(t *testing.T) string
	// LockQueuesWithRW is true where a lock and a read-write lock of one
	// name share one queue, a lock counting as a writer (ZooKeeper, in
	// kazoo's layout): between those two modes a try-once attempt is not
	// acquired and a waiting one gets in once the other lets go, as any
	// contender; the semaphore is still refused.
	LockQueuesWithRW bool
}

// permits is N of the semaphores the suite takes; ttl the leases.
const (
	permits = 3
	ttl     = 2 * time.Second
)

// A holder is one way to hold a name, in one mode.
type holder struct {
	name string
	mode string // lock.ModeLock, ModeReadWrite or ModeSemaphore
	take func(t *testing.T, h Harness, key string, wait time.Duration) (release func(), err error)
}

var holders = []holder{
	{"lock", lock.ModeLock, func(t *testing.T, h Harness, key string, wait time.Duration) (func(), error) {
		l, err := h.Lock(t).Acquire(ctxT(t), key, lock.WithTTL(ttl), lock.WithWait(wait))
		return leaseRelease(t, l), err
	}},
	{"election", lock.ModeLock, func(t *testing.T, h Harness, key string, wait time.Duration) (func(), error) {
		e, err := elect.New(h.Lock(t), key, elect.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		term, err := e.Campaign(ctxT(t), "host-a", elect.WithWait(wait))
		if err != nil {
			return func() {}, err
		}
		return func() { _ = term.Resign(ctxT(t)) }, nil
	}},
	{"reader", lock.ModeReadWrite, func(t *testing.T, h Harness, key string, wait time.Duration) (func(), error) {
		l, err := h.RW(t).RLock(ctxT(t), key, lock.WithTTL(ttl), lock.WithWait(wait))
		return leaseRelease(t, l), err
	}},
	{"writer", lock.ModeReadWrite, func(t *testing.T, h Harness, key string, wait time.Duration) (func(), error) {
		l, err := h.RW(t).Lock(ctxT(t), key, lock.WithTTL(ttl), lock.WithWait(wait))
		return leaseRelease(t, l), err
	}},
	{"semaphore", lock.ModeSemaphore, func(t *testing.T, h Harness, key string, wait time.Duration) (func(), error) {
		s, err := h.Semaphore(t).Semaphore(key, permits)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Acquire(ctxT(t), lock.WithTTL(ttl), lock.WithWait(wait))
		if err != nil {
			return func() {}, err
		}
		return leaseRelease(t, p.Lease), nil
	}},
}

func leaseRelease(t *testing.T, l *lock.Lease) func() {
	return func() {
		if l != nil {
			if err := l.Release(ctxT(t)); err != nil {
				t.Errorf("Release: %v", err)
			}
		}
	}
}

// Run checks every ordered pair of holders of different modes: while the
// first holds a name, the second is refused at once, trying once and
// waiting alike, with a *lock.ModeError naming the first's mode; once the
// first lets go, the second gets in. It also checks that a read-write lock
// or a semaphore still keeps a lock out once renewed past its first lease.
func Run(t *testing.T, h Harness) {
	for _, a := range holders {
		for _, b := range holders {
			if h.RW == nil && (a.mode == lock.ModeReadWrite || b.mode == lock.ModeReadWrite) {
				continue // the backend has no read-write locks
			}
			if a.mode == b.mode {
				continue // the same resource: ordinary contention
			}
			check := refused
			if h.LockQueuesWithRW && a.mode != lock.ModeSemaphore && b.mode != lock.ModeSemaphore {
				check = contend
			}
			t.Run(a.name+" then "+b.name, func(t *testing.T) {
				t.Parallel()
				check(t, h, a, b)
			})
		}
	}
	for _, a := range holders {
		if a.mode == lock.ModeLock || a.mode == lock.ModeReadWrite && (h.RW == nil || h.LockQueuesWithRW) {
			continue // a lock's own mode; no read-write locks; or one queue with them
		}
		t.Run(a.name+" renewed then lock", func(t *testing.T) {
			t.Parallel()
			renewedThenLock(t, h, a)
		})
	}
}

// renewedThenLock checks that a, a read-write lock or a semaphore, keeps
// the name from a lock after its first lease would have ended: its
// renewals hold the name as its acquisition did.
func renewedThenLock(t *testing.T, h Harness, a holder) {
	key := h.Key(t)
	release, err := a.take(t, h, key, 0)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	defer release()
	time.Sleep(ttl * 3 / 2)
	l, err := h.Lock(t).Acquire(ctxT(t), key, lock.WithTTL(ttl), lock.WithWait(0))
	if err == nil {
		leaseRelease(t, l)()
		t.Fatalf("a lock got in %v after %s took the name, its renewals notwithstanding", ttl*3/2, a.name)
	}
	checkRefusal(t, h, a, key, fmt.Sprintf("lock while a renewed %s holds", a.name), err)
}

// refused checks that b, another mode, is refused with a *lock.ModeError
// naming a's mode while a holds the name, at once and when it would wait,
// and gets in once a lets go.
func refused(t *testing.T, h Harness, a, b holder) {
	key := h.Key(t)
	release, err := a.take(t, h, key, 0)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	// A waiting attempt that waited would end in ErrNotAcquired.
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		other, err := b.take(t, h, key, wait)
		if err == nil {
			other()
			t.Fatalf("%s got in while %s held the name", b.name, a.name)
		}
		checkRefusal(t, h, a, key, fmt.Sprintf("%s (wait %v) while %s holds", b.name, wait, a.name), err)
	}
	release()
	other, err := b.take(t, h, key, 5*time.Second)
	if err != nil {
		t.Fatalf("%s after %s let go: %v", b.name, a.name, err)
	}
	other()
}

// checkRefusal checks that err, what an attempt (what) got while a held
// key, is a *lock.ModeError that names key as held in a's mode.
func checkRefusal(t *testing.T, h Harness, a holder, key, what string, err error) {
	t.Helper()
	var me *lock.ModeError
	if !errors.Is(err, lock.ErrOtherMode) || !errors.As(err, &me) {
		t.Fatalf("%s: %v, want a *lock.ModeError", what, err)
	}
	heldAs := me.HeldAs
	if h.LockQueuesWithRW && heldAs != lock.ModeSemaphore && a.mode != lock.ModeSemaphore {
		heldAs = a.mode // one queue: a writer's node is a lock's
	}
	if heldAs != a.mode || me.Key != key {
		t.Fatalf("the refusal says %q is held as %q, want %q as %q: %v", me.Key, me.HeldAs, key, a.mode, err)
	}
	if a.mode == lock.ModeSemaphore && me.Permits != 0 && me.Permits != permits {
		t.Fatalf("the refusal says %d permits, want %d: %v", me.Permits, permits, err)
	}
}

// contend checks two holders that share a queue: while a holds the name,
// b's try-once attempt is not acquired; a waiting b gets in once a lets go.
func contend(t *testing.T, h Harness, a, b holder) {
	key := h.Key(t)
	release, err := a.take(t, h, key, 0)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	if other, err := b.take(t, h, key, 0); !errors.Is(err, lock.ErrNotAcquired) {
		other()
		t.Fatalf("%s while %s holds: %v, want lock.ErrNotAcquired", b.name, a.name, err)
	}
	got := make(chan error, 1)
	go func() {
		other, err := b.take(t, h, key, 10*time.Second)
		if err == nil {
			other()
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Fatalf("%s waiting for %s to let go: %v", b.name, a.name, err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
