package redislock

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// While a read-write lock or a semaphore holds a name, its lock key holds
// their mark, which a lock's SET NX runs into. These tests cover what the
// mark must not do: keep a lock out once the other mode let go, show up to
// an operator as a lock, or be broken as one.

// A reader that let go leaves its mark behind, and a lock that finds it
// takes the name at once: waiting out the mark would stall every lock that
// follows a read-write lock or a semaphore on the same name.
func TestLockTakesTheNameAtOnceAfterOtherModesLetGo(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	h := modeHarness(func(t *testing.T) Client { return newClient(t, addr) }, nil)
	rw, sems, l := h.RW(t), h.Semaphore(t), h.Lock(t)
	key := prefix + "k"

	others := []struct {
		name string
		take func() (*lock.Lease, error)
	}{
		{"reader", func() (*lock.Lease, error) { return rw.RLock(ctxT(t), key, lock.WithTTL(30*time.Second)) }},
		{"semaphore", func() (*lock.Lease, error) {
			s, err := sems.Semaphore(key, 2)
			if err != nil {
				return nil, err
			}
			p, err := s.Acquire(ctxT(t), lock.WithTTL(30*time.Second))
			if err != nil {
				return nil, err
			}
			return p.Lease, nil
		}},
	}
	var last uint64
	for _, o := range others {
		other, err := o.take()
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if err := other.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctxT(t), key, lock.WithWait(0))
		if err != nil {
			t.Fatalf("lock after the %s let go: %v, want it at once", o.name, err)
		}
		if lease.Token() <= last {
			t.Errorf("token %d after %d: want it higher", lease.Token(), last)
		}
		last = lease.Token()
		if err := lease.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// An operator sees a name a reader holds as no lock, and breaking "the lock"
// of that name changes nothing: the reader still keeps locks out.
func TestOtherModesMarkIsNoLockToTheOperator(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	rw := modeHarness(func(t *testing.T) Client { return newClient(t, addr) }, nil).RW(t)
	l := newLocker(t, newClient(t, addr))
	key := prefix + "k"

	r, err := rw.RLock(ctxT(t), key, lock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Release(ctxT(t)) }()

	if info, err := l.InspectLock(ctxT(t), key); err != nil || info.Held {
		t.Errorf("InspectLock of a name a reader holds = %+v, %v; want not held", info, err)
	}
	page, err := l.ListLocks(ctxT(t), prefix, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Locks) != 0 {
		t.Errorf("ListLocks lists %+v while only a reader holds a name", page.Locks)
	}
	if _, err := l.BreakLock(ctxT(t), key); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("BreakLock of a name a reader holds = %v, want lock.ErrNotHeld", err)
	}
	lease, err := l.Acquire(ctxT(t), key, lock.WithWait(0))
	if err == nil {
		_ = lease.Release(ctxT(t))
		t.Fatal("a lock got in after BreakLock while a reader held the name")
	}
	if !errors.Is(err, lock.ErrOtherMode) {
		t.Fatalf("lock while a reader holds: %v, want lock.ErrOtherMode", err)
	}
}
