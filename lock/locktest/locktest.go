// Package locktest is the conformance suite every lock backend passes against
// a real server. A backend is done when Run passes.
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, locktest.Harness{
//			New:    func(t *testing.T) lock.Locker { ... },
//			Revoke: func(t *testing.T, key string) { ... },
//		})
//	}
package locktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// Harness describes a backend under test.
type Harness struct {
	// New returns a new Locker with its own connection(s) to the server. It is
	// called several times per test to model separate processes. If the
	// Locker implements io.Closer, the suite closes it at the end of the test.
	New func(t *testing.T) lock.Locker

	// Revoke deletes key's lock behind its holder's back, as an operator, an
	// eviction or a failover would.
	Revoke func(t *testing.T, key string)

	// Restart restarts the server (or reopens the store), keeping only what
	// the backend persists. Lockers made before may stop working; the suite
	// makes new ones. Nil means the backend has no server to restart, and the
	// restart test is skipped with that reason.
	Restart func(t *testing.T)

	// Cut, if set, cuts l (a Locker New returned) off from the server for
	// good, as a crash, a freeze or a partition of its process would:
	// typically it closes l's client. The locks l holds stay on the server
	// until their TTL runs out. Set it for backends that tell a waiter how
	// long the holder has left (Backend.TryAcquire's holderTTL); the suite
	// then checks that waiters get a dead holder's lock within a few
	// milliseconds of its expiry, never before. Nil skips that test.
	Cut func(t *testing.T, l lock.Locker)

	// Holder, if set, reads from the server, as an inspection command
	// would, the holder label (lock.WithHolder) stored with key's lock,
	// "" for none; the suite checks that the label a lease was taken with
	// is the one stored. Nil skips that test (a backend without a server).
	Holder func(t *testing.T, key string) string

	// WaitersUnknown tells RunOperator that the backend's LockInfo cannot
	// show that someone waits (neither Waiters nor Waiting).
	WaitersUnknown bool

	// TTL is the short lease the suite uses where renewal or expiry must
	// happen during a test. Default: 1 s, which leaves a renewal 2/3 s to be
	// answered on a loaded machine (at 300 ms, a pgx renewal unanswered
	// for 200 ms lost a lease). Backends whose servers answer slowly under load
	// (a JVM) may ask for more.
	TTL time.Duration
}

// defaultShortTTL is Harness.TTL's default.
const defaultShortTTL = time.Second

// eventually bounds waits for things that must happen; it is a failure
// timeout, not a performance target.
const eventually = 10 * time.Second

// Run runs the whole suite. Subtests run in parallel with unique keys, except
// the goroutine-leak and restart tests, which run alone.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Revoke == nil {
		t.Fatal("locktest: Harness.New and Harness.Revoke are required")
	}
	s := &suite{h: h, shortTTL: cmp.Or(h.TTL, defaultShortTTL)}
	t.Run("NoGoroutineLeaks", s.noGoroutineLeaks)
	t.Run("Contract", func(t *testing.T) {
		suitekit.Cases{
			{"BadInput", s.badInput},
			{"MutualExclusion", s.mutualExclusion},
			{"TryOnce", s.tryOnce},
			{"WaitLimit", s.waitLimit},
			{"ContextCancelWhileWaiting", s.ctxCancel},
			{"WaiterWakesOnRelease", s.wakeOnRelease},
			{"ReleaseOnlyOwnLock", s.releaseOwn},
			{"ReleaseTwice", s.releaseTwice},
			{"ReleaseAfterClientWentAway", s.releaseCancelled},
			{"FixedTTLExpires", s.fixedTTL},
			{"ExtendFixedLease", s.extend},
			{"HolderLabelStored", s.holderLabel},
			{"RenewalKeepsLeaseAlive", s.renewal},
			{"DoneWhenRevoked", s.revoked},
			{"DoCancelsOnLoss", s.doCancels},
			{"DoReleases", s.doReleases},
			{"DoSucceededThenLost", s.doSucceededThenLost},
			{"TokensIncrease", s.tokensIncrease},
		}.RunParallel(t)
	})
	t.Run("Fairness", suitekit.Cases{{"ArrivalOrder", s.arrivalOrder}, {"NoStarvation", s.noStarvation}}.RunParallel)
	t.Run("DeadHolderSucceededAtExpiry", s.deadHolder)
	t.Run("TokensIncreaseAcrossRestart", s.restart)
}

type suite struct {
	h        Harness
	shortTTL time.Duration
}

func (s *suite) locker(t *testing.T) lock.Locker {
	t.Helper()
	return suitekit.Made(t, s.h.New(t))
}

// key returns a key unique to this test and run.
func key(t *testing.T, suffix string) string {
	return suitekit.Name(t, "locktest", ":") + ":" + suffix
}

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 60*time.Second) }

func mustAcquire(t *testing.T, l lock.Locker, key string, opts ...lock.Option) *lock.Lease {
	t.Helper()
	lease, err := l.Acquire(ctxT(t), key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	if lease.Key() != key {
		t.Fatalf("lease.Key() = %q, want %q", lease.Key(), key)
	}
	if lease.Err() != nil {
		t.Fatalf("fresh lease has Err() = %v", lease.Err())
	}
	return lease
}

func (s *suite) badInput(t *testing.T) {
	l := s.locker(t)
	ctx := ctxT(t)
	k := key(t, "k")
	cases := []struct {
		name string
		key  string
		opts []lock.Option
	}{
		{"empty key", "", nil},
		{"key too long", strings.Repeat("k", lock.MaxKeyLen+1), nil},
		{"TTL too short", k, []lock.Option{lock.WithTTL(time.Millisecond)}},
		{"TTL zero", k, []lock.Option{lock.WithTTL(0)}},
		{"TTL too long", k, []lock.Option{lock.WithTTL(25 * time.Hour)}},
		{"negative wait", k, []lock.Option{lock.WithWait(-time.Second)}},
	}
	for _, c := range cases {
		lease, err := l.Acquire(ctx, c.key, c.opts...)
		if !errors.Is(err, lock.ErrInvalid) || lease != nil {
			t.Errorf("%s: Acquire = (%v, %v), want ErrInvalid", c.name, lease, err)
		}
	}
	// Nothing was taken: the key is free.
	suitekit.Release(t, mustAcquire(t, l, k, lock.WithWait(0)))
}

// mutualExclusion runs a deliberately racy read-sleep-write counter under the
// lock from several Lockers and goroutines; any overlap loses an increment.
func (s *suite) mutualExclusion(t *testing.T) {
	const lockers, perLocker, rounds = 3, 4, 8
	k := key(t, "counter")
	var (
		cs critical
		wg sync.WaitGroup
	)
	for range lockers {
		l := s.locker(t)
		for range perLocker {
			wg.Go(func() {
				for range rounds {
					if !cs.visit(t, l, k) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := cs.overlaps.Load(); n > 0 {
		t.Errorf("%d times a holder entered while another was inside", n)
	}
	if n := cs.tokenDrops.Load(); n > 0 {
		t.Errorf("%d times a holder's token was not above its predecessor's", n)
	}
	if got, want := cs.counter.Load(), int64(lockers*perLocker*rounds); got != want {
		t.Fatalf("counter = %d, want %d: the lock let holders overlap", got, want)
	}
}

// A critical section is what mutualExclusion's holders share. The counter
// is read, then written after a pause: a lost update unless the lock
// serialises holders. Atomics keep the race detector quiet, since it
// cannot see the ordering a remote lock provides.
type critical struct {
	counter    atomic.Int64
	inside     atomic.Int32
	lastToken  atomic.Uint64
	overlaps   atomic.Int64
	tokenDrops atomic.Int64
}

// visit takes key on l, enters and releases it; false after a failure,
// which it reports.
func (cs *critical) visit(t *testing.T, l lock.Locker, key string) bool {
	lease, err := l.Acquire(ctxT(t), key, lock.WithTTL(5*time.Second))
	if err != nil {
		t.Errorf("Acquire: %v", err)
		return false
	}
	if n := cs.inside.Add(1); n != 1 {
		cs.overlaps.Add(1)
	}
	if lease.Token() <= cs.lastToken.Load() {
		cs.tokenDrops.Add(1)
	}
	cs.lastToken.Store(lease.Token())
	v := cs.counter.Load()
	time.Sleep(200 * time.Microsecond)
	cs.counter.Store(v + 1)
	cs.inside.Add(-1)
	if err := lease.Release(ctxT(t)); err != nil {
		t.Errorf("Release: %v", err)
		return false
	}
	return true
}

func (s *suite) tryOnce(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	held := mustAcquire(t, a, k, lock.WithTTL(10*time.Second))
	lease, err := b.Acquire(ctxT(t), k, lock.WithWait(0))
	if !errors.Is(err, lock.ErrNotAcquired) || lease != nil {
		t.Fatalf("try-once on a held key = (%v, %v), want ErrNotAcquired", lease, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("try-once error %v looks like a context error", err)
	}
	s.checkHeld(t, err, 10*time.Second)
	// Also from the same Locker: not reentrant.
	if _, err := a.Acquire(ctxT(t), k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Acquire on the same Locker = %v, want ErrNotAcquired", err)
	}
	suitekit.Release(t, held)
	suitekit.Release(t, mustAcquire(t, b, k, lock.WithWait(0)))
}

func (s *suite) waitLimit(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	held := mustAcquire(t, a, k, lock.WithTTL(20*time.Second))
	defer suitekit.Release(t, held)
	const wait = 200 * time.Millisecond
	start := time.Now()
	_, err := b.Acquire(ctxT(t), k, lock.WithWait(wait))
	elapsed := time.Since(start)
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Acquire with a wait limit = %v, want ErrNotAcquired", err)
	}
	if elapsed < wait {
		t.Fatalf("gave up after %v, before the %v wait limit", elapsed, wait)
	}
	if elapsed > eventually {
		t.Fatalf("waited %v for a %v wait limit", elapsed, wait)
	}
	s.checkHeld(t, err, 20*time.Second)
	suitekit.NotDone(t, held)
}

// checkHeld checks the holder's time left that err, from an Acquire that
// found the key held under a lease of ttl, tells: some, at most ttl, and
// told at all by backends that tell waiters (Harness.Cut set).
func (s *suite) checkHeld(t *testing.T, err error, ttl time.Duration) {
	t.Helper()
	var held *lock.HeldError
	switch {
	case errors.As(err, &held):
		if held.TimeLeft <= 0 || held.TimeLeft > ttl {
			t.Fatalf("HeldError.TimeLeft = %v for a holder's %v lease", held.TimeLeft, ttl)
		}
	case s.h.Cut != nil:
		t.Fatalf("Acquire on a held key = %v, want a *lock.HeldError telling the holder's time left", err)
	}
}

func (s *suite) ctxCancel(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	held := mustAcquire(t, a, k, lock.WithTTL(20*time.Second))
	defer suitekit.Release(t, held)

	ctx, cancel := context.WithCancel(ctxT(t))
	time.AfterFunc(150*time.Millisecond, cancel)
	if _, err := b.Acquire(ctx, k); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled while waiting = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(ctxT(t), 150*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its ctx deadline = %v, want context.DeadlineExceeded", err)
	}
	// A done context fails at once and takes nothing.
	if _, err := b.Acquire(ctx, key(t, "free")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a done ctx = %v, want context.DeadlineExceeded", err)
	}
}

// wakeOnRelease checks that a waiter gets the lock soon after the holder
// releases, not when the holder's TTL runs out.
func (s *suite) wakeOnRelease(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	const ttl = 30 * time.Second
	held := mustAcquire(t, a, k, lock.WithTTL(ttl))
	got := make(chan *lock.Lease, 1)
	go func() {
		lease, err := b.Acquire(ctxT(t), k, lock.WithWait(ttl/2))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- lease
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter acquired a held lock")
	default:
	}
	released := time.Now()
	suitekit.Release(t, held)
	lease := <-got
	if lease == nil {
		return
	}
	if lag := time.Since(released); lag > 5*time.Second {
		t.Fatalf("waiter took %v after release (TTL %v): not woken by the release", lag, ttl)
	}
	if lease.Token() <= held.Token() {
		t.Fatalf("successor token %d <= predecessor's %d", lease.Token(), held.Token())
	}
	suitekit.Release(t, lease)
}

func (s *suite) releaseOwn(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	first := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL))
	s.h.Revoke(t, k)
	second := mustAcquire(t, b, k, lock.WithTTL(10*time.Second), lock.WithWait(eventually))
	if err := first.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale holder's Release = %v, want ErrNotHeld", err)
	}
	// The stale release must not have deleted the new holder's lock.
	if _, err := a.Acquire(ctxT(t), k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("after a stale Release the key is free (%v): it deleted another holder's lock", err)
	}
	suitekit.NotDone(t, second)
	suitekit.Release(t, second)
}

func (s *suite) releaseTwice(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	lease := mustAcquire(t, l, k)
	suitekit.Release(t, lease)
	if err := lease.Release(ctxT(t)); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	suitekit.WaitDone(t, lease, time.Second)
	if !errors.Is(lease.Err(), lock.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", lease.Err())
	}
	// Someone else holds it now; our third Release must not touch it.
	other := mustAcquire(t, s.locker(t), k, lock.WithWait(0))
	if err := lease.Release(ctxT(t)); err != nil {
		t.Fatalf("third Release = %v", err)
	}
	if _, err := l.Acquire(ctxT(t), k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("repeated Release freed another holder's lock: %v", err)
	}
	suitekit.Release(t, other)
}

// releaseCancelled is `defer lease.Release(r.Context())` in a handler whose
// client went away: the request's context is cancelled before Release runs,
// and the lock must still be deleted at once, not left until its TTL.
func (s *suite) releaseCancelled(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := mustAcquire(t, a, k, lock.WithTTL(30*time.Second))
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release with a cancelled ctx = %v, want nil", err)
	}
	if !errors.Is(lease.Err(), lock.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", lease.Err())
	}
	next, err := b.Acquire(ctxT(t), k, lock.WithWait(0))
	if err != nil {
		t.Fatalf("try-once right after a Release with a cancelled ctx = %v: the lock was left for its 30 s TTL", err)
	}
	suitekit.Release(t, next)
}

func (s *suite) fixedTTL(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	probe := startStallProbe()
	defer probe.stop()
	lease := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL), lock.WithFixedTTL())
	start := time.Now()
	suitekit.WaitDone(t, lease, eventually)
	// The holder must learn of the expiry before the server expires the lock.
	// The slack covers timer latency on a loaded machine, nothing else; a
	// stall of this process, whose timer closes Done, is not counted.
	if since, slack := time.Since(start), 50*time.Millisecond; since > s.shortTTL+slack {
		if stall := probe.longestIn(start.Add(s.shortTTL), time.Now()); stall > slack/2 {
			t.Logf("fixed lease reported lost after %v, its TTL %v, during a stall of %v of this process: not counted", since, s.shortTTL, stall)
		} else {
			t.Fatalf("fixed lease reported lost after %v, later than its TTL %v", since, s.shortTTL)
		}
	}
	if !errors.Is(lease.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err after expiry = %v, want ErrLeaseLost", lease.Err())
	}
	next := mustAcquire(t, b, k, lock.WithWait(eventually))
	if next.Token() <= lease.Token() {
		t.Fatalf("token after expiry %d <= expired holder's %d", next.Token(), lease.Token())
	}
	if err := lease.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of an expired lease = %v, want ErrNotHeld", err)
	}
	suitekit.NotDone(t, next)
	suitekit.Release(t, next)
}

// extend lengthens a fixed lease past its first TTL, as a job that needs
// longer than planned would, and checks Extend's refusals.
func (s *suite) extend(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	ctx := ctxT(t)
	lease := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL), lock.WithFixedTTL())
	for _, bad := range []time.Duration{0, time.Millisecond, 25 * time.Hour} {
		if err := lease.Extend(ctx, bad); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("Extend(%v) = %v, want ErrInvalid", bad, err)
		}
	}
	before := time.Now()
	if err := lease.Extend(ctx, 3*s.shortTTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if d, floor := lease.Deadline(), before.Add(3*s.shortTTL-lock.DriftMargin(3*s.shortTTL)); d.Before(floor) {
		t.Fatalf("Deadline after Extend is %v before the extension's", floor.Sub(d))
	}
	time.Sleep(s.shortTTL + s.shortTTL/2) // past the first TTL
	suitekit.NotDone(t, lease)
	if _, err := b.Acquire(ctx, k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("an extended lease was acquirable by another holder after its first TTL: %v", err)
	}
	if left := lease.TimeLeft(); left <= 0 || left > 3*s.shortTTL {
		t.Fatalf("TimeLeft after Extend = %v", left)
	}
	if lease.TTL() != s.shortTTL {
		t.Fatalf("TTL after Extend = %v, want the requested %v", lease.TTL(), s.shortTTL)
	}
	suitekit.Release(t, lease)
	if err := lease.Extend(ctx, s.shortTTL); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Extend after Release = %v, want ErrReleased", err)
	}

	renewed := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL))
	if err := renewed.Extend(ctx, s.shortTTL); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Extend of a renewed lease = %v, want ErrInvalid", err)
	}
	suitekit.Release(t, renewed)

	revoked := mustAcquire(t, a, k, lock.WithTTL(3*s.shortTTL), lock.WithFixedTTL())
	s.h.Revoke(t, k)
	err := revoked.Extend(ctx, 3*s.shortTTL)
	if !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("Extend of a revoked lease = %v, want ErrNotHeld and ErrLeaseLost", err)
	}
	suitekit.WaitDone(t, revoked, time.Second)
}

// holderLabel checks that a lease's holder label is stored with its lock,
// for an operator to read, and that a lease without one stores none.
func (s *suite) holderLabel(t *testing.T) {
	if s.h.Holder == nil {
		t.Skip("backend has no server to read (Harness.Holder is nil)")
	}
	l := s.locker(t)
	k := key(t, "k")
	const label = "host-7 pid 4242 request 01HZX3"
	lease := mustAcquire(t, l, k, lock.WithHolder(label))
	if lease.Holder() != label {
		t.Fatalf("Holder() = %q, want %q", lease.Holder(), label)
	}
	if got := s.h.Holder(t, k); got != label {
		t.Fatalf("the server stores holder label %q, want %q", got, label)
	}
	suitekit.Release(t, lease)
	plain := mustAcquire(t, l, k)
	if got := s.h.Holder(t, k); got != "" || plain.Holder() != "" {
		t.Fatalf("without WithHolder the server stores label %q (Holder() %q), want none", got, plain.Holder())
	}
	suitekit.Release(t, plain)
}

func (s *suite) renewal(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL))
	time.Sleep(6 * s.shortTTL)
	suitekit.NotDone(t, lease)
	if _, err := b.Acquire(ctxT(t), k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a renewed lease was acquirable by another holder after 6 TTLs: %v", err)
	}
	suitekit.Release(t, lease)
}

func (s *suite) revoked(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	lease := mustAcquire(t, l, k, lock.WithTTL(s.shortTTL))
	s.h.Revoke(t, k)
	suitekit.WaitDone(t, lease, eventually)
	if !errors.Is(lease.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err after revocation = %v, want ErrLeaseLost", lease.Err())
	}
	if err := lease.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after loss = %v, want ErrNotHeld", err)
	}
}

func (s *suite) doCancels(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	err := lock.Do(ctxT(t), l, k, func(ctx context.Context, lease *lock.Lease) error {
		s.h.Revoke(t, k)
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), lock.ErrLeaseLost) {
				t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
			}
			return ctx.Err()
		case <-time.After(eventually):
			t.Error("fn's context not cancelled after the lock was revoked")
			return nil
		}
	}, lock.WithTTL(s.shortTTL))
	if !errors.Is(err, lock.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want ErrLeaseLost and context.Canceled", err)
	}
}

// doSucceededThenLost is a payment charged under the lock whose lease lapsed
// before Do returned: Do must say the work succeeded, so the caller answers
// success instead of failing and having the charge retried.
func (s *suite) doSucceededThenLost(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	err := lock.Do(ctxT(t), l, k, func(ctx context.Context, lease *lock.Lease) error {
		s.h.Revoke(t, k)
		select {
		case <-ctx.Done():
		case <-time.After(eventually):
			t.Error("fn's context not cancelled after the lock was revoked")
		}
		return nil // the card was charged before the loss was noticed
	}, lock.WithTTL(s.shortTTL))
	var lost *lock.LostError
	if !errors.As(err, &lost) {
		t.Fatalf("Do = %v, want a *lock.LostError", err)
	}
	if !lost.Succeeded() || lost.Err != nil {
		t.Fatalf("LostError says the work failed (%v); fn returned nil", lost.Err)
	}
	if !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want ErrLeaseLost", err)
	}

	// fn failed after the loss: its error stays reachable beside the loss.
	failed := errors.New("card declined")
	err = lock.Do(ctxT(t), l, k, func(ctx context.Context, lease *lock.Lease) error {
		s.h.Revoke(t, k)
		<-ctx.Done()
		return failed
	}, lock.WithTTL(s.shortTTL))
	if !errors.As(err, &lost) || lost.Succeeded() || !errors.Is(err, failed) || !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("Do = %v, want a *lock.LostError with fn's error and ErrLeaseLost", err)
	}
}

func (s *suite) doReleases(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	var token uint64
	sentinel := errors.New("fn failed")
	err := lock.Do(ctxT(t), l, k, func(ctx context.Context, lease *lock.Lease) error {
		token = lease.Token()
		if _, err := s.locker(t).Acquire(ctx, k, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Errorf("lock free while Do runs: %v", err)
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	next := mustAcquire(t, l, k, lock.WithWait(0))
	if next.Token() <= token {
		t.Fatalf("token %d after Do <= Do's token %d", next.Token(), token)
	}
	suitekit.Release(t, next)
}

func (s *suite) tokensIncrease(t *testing.T) {
	lockers := []lock.Locker{s.locker(t), s.locker(t), s.locker(t)}
	k := key(t, "k")
	var last uint64
	for i := range 12 {
		lease := mustAcquire(t, lockers[i%len(lockers)], k)
		if lease.Token() <= last {
			t.Fatalf("acquisition %d: token %d <= previous %d", i, lease.Token(), last)
		}
		last = lease.Token()
		suitekit.Release(t, lease)
	}
	// Tokens are per key, but a new key must also never issue 0.
	other := mustAcquire(t, lockers[0], key(t, "other"))
	if other.Token() == 0 {
		t.Fatal("token 0 issued")
	}
	suitekit.Release(t, other)
}

// deadHolder has holders take locks for a fixed second and then die
// (crashed, frozen or partitioned: their Locker is cut off, so nobody
// releases), with a waiter for each starting at a different moment of the
// lease. Each waiter must get the lock within a few milliseconds of the
// lease's end on the server, and never before it.
func (s *suite) deadHolder(t *testing.T) {
	if s.h.Cut == nil {
		t.Skip("backend does not tell waiters the holder's time left (Harness.Cut is nil)")
	}
	d := &deadHolders{s: s, t: t, probe: startStallProbe()}
	defer d.probe.stop()
	// The server may stall too (it shares the machine); a stall of its
	// answers, which a Locker of its own reads, is not the waiter's lag.
	if in, ok := s.locker(t).(lock.Inspector); ok {
		server := startServerProbe(in, key(t, "probe"))
		defer server.stop()
		d.probe.also = server
	}
	for first := 0; first < deadTrials; first += deadPerRound {
		d.round(first)
	}
	if len(d.lags) > 1 {
		t.Errorf("%d of %d waiters got a dead holder's lock more than %v after its lease ended:\n%s",
			len(d.lags), deadTrials, deadLate, strings.Join(d.lags, "\n"))
	}
}

const (
	deadTrials = 16
	// Trials run a round of four at a time, their leases a quarter TTL
	// apart, so that the waiters' attempts of one trial do not queue
	// behind another's (SQLite has one writer at a time).
	deadPerRound = 4
	deadTTL      = time.Second
	// deadLate bounds how long after the expiry a waiter may get the lock:
	// a few attempts' round trips, on a loaded machine. One trial of the
	// sixteen may take up to deadStalled, for a stall of a machine shared
	// with other work (a waiter polled only up to a second later, or told
	// "unknown" in the lease's last millisecond, fails far more than one).
	deadLate, deadStalled = 50 * time.Millisecond, 5 * 50 * time.Millisecond
	// deadEarly allows for the servers' millisecond clocks: the server
	// counts the TTL from its clock truncated to the millisecond.
	deadEarly = 2 * time.Millisecond
)

// deadHolders runs deadHolder's trials and keeps the late ones.
type deadHolders struct {
	s     *suite
	t     *testing.T
	probe *stallProbe
	mu    sync.Mutex
	lags  []string // of the trials later than deadLate; guarded by mu
}

// round runs trials first to first+deadPerRound-1 at once, each with a
// holder and a waiter of its own, their leases a quarter TTL apart.
func (d *deadHolders) round(first int) {
	holders, waiters := make([]lock.Locker, deadPerRound), make([]lock.Locker, deadPerRound)
	for j := range deadPerRound {
		holders[j], waiters[j] = d.s.locker(d.t), d.s.locker(d.t)
		warmWaiter(d.t, holders[j], waiters[j])
	}
	var wg sync.WaitGroup
	for j := range deadPerRound {
		wg.Go(func() {
			time.Sleep(time.Duration(j) * deadTTL / deadPerRound)
			d.trial(first+j, holders[j], waiters[j])
		})
	}
	wg.Wait()
}

// trial has holder take a lock for deadTTL and die, and waiter, started
// at a moment of the lease that i chooses, wait for it.
func (d *deadHolders) trial(i int, holder, waiter lock.Locker) {
	t := d.t
	k := key(t, "k")
	begin, dead, err := acquireFixed(t, holder, k)
	if err != nil {
		t.Errorf("holder: %v", err)
		return
	}
	taken := time.Now()
	d.s.h.Cut(t, holder)
	// Waiters start anywhere from right after the acquisition to the
	// lease's last twentieth.
	time.Sleep(time.Duration(i*7%deadTrials) * deadTTL * 95 / 100 / deadTrials)
	started := time.Now()
	lease, err := waiter.Acquire(ctxT(t), k, lock.WithWait(eventually))
	got := time.Now()
	if err != nil {
		t.Errorf("waiter started %v into the lease: %v", started.Sub(taken), err)
		return
	}
	defer func() {
		if err := lease.Release(ctxT(t)); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	if got.Before(begin.Add(deadTTL - deadEarly)) {
		t.Errorf("waiter started %v into the lease got the lock %v before the dead holder's lease ended",
			started.Sub(taken), begin.Add(deadTTL).Sub(got))
	}
	if !d.onTime(started.Sub(taken), taken.Add(deadTTL), got) {
		return
	}
	if lease.Token() <= dead.Token() {
		t.Errorf("token %d after the dead holder's %d", lease.Token(), dead.Token())
	}
}

// acquireFixed takes key through holder for deadTTL without renewal,
// trying up to three times (setting up, not under test: a busy server may
// fail a try). It returns when the successful attempt began.
func acquireFixed(t *testing.T, holder lock.Locker, key string) (begin time.Time, lease *lock.Lease, err error) {
	for range 3 {
		begin = time.Now()
		if lease, err = holder.Acquire(ctxT(t), key, lock.WithTTL(deadTTL), lock.WithFixedTTL()); err == nil {
			return begin, lease, nil
		}
	}
	return begin, nil, err
}

// onTime checks that a waiter started into the lease at into got the
// lock, at got, soon after the lease ended at end. A lag during a stall of
// this process or the server is logged and not counted; onTime then
// reports false, and the trial checks nothing more.
func (d *deadHolders) onTime(into time.Duration, end, got time.Time) bool {
	lag := got.Sub(end)
	if lag <= deadLate {
		return true
	}
	msg := fmt.Sprintf("waiter started %v into the lease got the lock %v after the dead holder's lease ended", into, lag)
	if stall := d.probe.longestIn(end, got); stall > deadLate/2 {
		// This process itself, or the server, did not run for that long:
		// the machine, not the waiter, was late.
		d.t.Logf("%s, during a stall of %v of this process or the server: not counted", msg, stall)
		return false
	}
	if lag > deadStalled {
		d.t.Errorf("%s, want within %v", msg, deadLate)
	}
	d.mu.Lock()
	d.lags = append(d.lags, msg)
	d.mu.Unlock()
	return true
}

// warmWaiter has waiter wait once for a key holder releases, so that what
// a Locker sets up for its first wait is in place before a trial times it:
// on PostgreSQL the first wait holds its next attempt until the Locker's
// LISTEN connection is up, which on a loaded machine took 400 to 700 ms,
// past a lease's end.
func warmWaiter(t *testing.T, holder, waiter lock.Locker) {
	t.Helper()
	k := key(t, "warm")
	held := mustAcquire(t, holder, k)
	got := make(chan error, 1)
	go func() {
		lease, err := waiter.Acquire(ctxT(t), k, lock.WithWait(eventually))
		if err == nil {
			err = lease.Release(ctxT(t))
		}
		got <- err
	}()
	waitQueued(t, waiter, k, 1)
	suitekit.Release(t, held)
	if err := <-got; err != nil {
		t.Fatalf("first wait of a waiter: %v", err)
	}
}

func (s *suite) restart(t *testing.T) {
	if s.h.Restart == nil {
		t.Skip("backend has no server to restart (Harness.Restart is nil)")
	}
	k := key(t, "k")
	before := mustAcquire(t, s.locker(t), k)
	suitekit.Release(t, before)
	s.h.Restart(t)
	var after *lock.Lease
	deadline := time.Now().Add(eventually)
	for {
		lease, err := s.locker(t).Acquire(ctxT(t), k, lock.WithWait(eventually))
		if err == nil {
			after = lease
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after.Token() <= before.Token() {
		t.Fatalf("token after restart %d <= token before %d: fencing went backwards", after.Token(), before.Token())
	}
	suitekit.Release(t, after)
}

// noGoroutineLeaks holds, waits for and releases leases, then checks that
// no goroutine started by latchkey is left once the Lockers are closed.
func (s *suite) noGoroutineLeaks(t *testing.T) {
	before := suitekit.Goroutines()
	t.Run("work", func(t *testing.T) {
		a, b := s.locker(t), s.locker(t)
		k := key(t, "k")
		held := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL))
		fixed := mustAcquire(t, a, key(t, "fixed"), lock.WithTTL(s.shortTTL), lock.WithFixedTTL())
		got := make(chan error, 1)
		go func() {
			lease, err := b.Acquire(ctxT(t), k)
			if err == nil {
				err = lease.Release(ctxT(t))
			}
			got <- err
		}()
		time.Sleep(2 * s.shortTTL / 3) // at least one renewal
		suitekit.Release(t, held)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		suitekit.WaitDone(t, fixed, eventually)
		lost := mustAcquire(t, a, k, lock.WithTTL(s.shortTTL))
		s.h.Revoke(t, k)
		suitekit.WaitDone(t, lost, eventually)
	}) // Lockers are closed by the subtest's cleanup.
	suitekit.WaitNoMore(t, before, eventually)
}

// Cuts remembers how to cut each Locker off from its server, for
// Harness.Cut: Harness.New registers each Locker it makes with Add, and
// Harness.Cut is Cuts.Cut. The zero value is ready to use.
type Cuts struct {
	m sync.Map // lock.Locker -> func()
}

// Add records cut as the way to cut l off (close its client, its pool) and
// returns l.
func (c *Cuts) Add(l lock.Locker, cut func()) lock.Locker {
	c.m.Store(l, cut)
	return l
}

// Cut runs the cut recorded for l, once; it fails t if none was.
func (c *Cuts) Cut(t *testing.T, l lock.Locker) {
	t.Helper()
	cut, ok := c.m.LoadAndDelete(l)
	if !ok {
		t.Errorf("locktest: no cut recorded for Locker %T (Cuts.Add)", l)
		return
	}
	cut.(func())()
}

// waitQueued returns once n Acquire calls of l wait for key, if l tells
// (lock.Manager's Waiting), or after a generous pause if not.
func waitQueued(t *testing.T, l lock.Locker, key string, n int) {
	t.Helper()
	w, ok := l.(interface{ Waiting(key string) int })
	if !ok {
		time.Sleep(500 * time.Millisecond)
		return
	}
	for end := time.Now().Add(eventually); w.Waiting(key) < n; {
		if time.Now().After(end) {
			t.Fatalf("%d waiters queued for %q after %v, want %d", w.Waiting(key), key, eventually, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// arrivalOrder: five callers of one Locker wait in turn for a held key,
// each starting once the one before is queued; they get it in the order
// they came, none barging ahead of one that waited longer.
func (s *suite) arrivalOrder(t *testing.T) {
	l := s.locker(t)
	k := key(t, "k")
	first := mustAcquire(t, l, k)
	const n = 5
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctxT(t), k, lock.WithTTL(5*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // the others stay queued meanwhile
			if err := lease.Release(ctxT(t)); err != nil {
				t.Errorf("waiter %d: release: %v", i, err)
			}
		}()
		waitQueued(t, l, k, i+1)
	}
	suitekit.Release(t, first)
	wg.Wait()
	for i, g := range order {
		if g != i {
			t.Fatalf("served in the order %v, want arrival order", order)
		}
	}
	t.Logf("served in the order %v", order)
}

// noStarvation: three Lockers (three processes), two goroutines in each,
// take and give back one key as fast as they can until it has changed
// hands 180 times, counted once each goroutine has taken it once (so that
// no Locker is still opening connections). Every goroutine gets the key,
// and none more than maxFairness times as often as another: a Locker whose
// goroutines hand the key to each other does not shut out the rest.
//
// Who wins each race for a released key is up to the machine's scheduler
// as much as the code: on a loaded machine, a server connection or a
// Locker left without CPU for a few hundred milliseconds loses its races
// meanwhile (on PostgreSQL with the load average at 5 on 2 cores, three
// runs in ten went past 3x, as [27 27 57 60 7 7]). The measurement is taken
// up to three times and passes when one round is fair; a Locker that
// learns of releases 20 ms late loses in every round ([82 83 4 5 6 5]).
func (s *suite) noStarvation(t *testing.T) {
	const rounds = 3
	var got []string
	for round := range rounds {
		counts, err := s.starvationRound(t)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		t.Logf("round %d: acquisitions per goroutine %v (max/min %d/%d)", round, counts, hi, lo)
		if lo > 0 && hi <= maxFairness*lo {
			return
		}
		got = append(got, fmt.Sprint(counts))
	}
	t.Fatalf("acquisitions per goroutine %s: want every goroutine served, max at most %d times min, in one of %d rounds",
		strings.Join(got, ", "), maxFairness, rounds)
}

// A Manager hands a released key to its own next waiter directly every
// other release; the rest are announced to every Locker alike. A herd
// that lets the fastest barge in fails noStarvation (SQLite before waiting
// moved into the Manager: [6 33 28 17 57 44]), and so did Redis's pub/sub,
// which tells the first subscriber first (54/8), until a Locker woke its
// waiters after a random sub-millisecond delay.
const maxFairness = 3

// starvationRound is one measurement of noStarvation, on a key of its
// own: the acquisitions of each goroutine, or the first error.
func (s *suite) starvationRound(t *testing.T) ([]int, error) {
	const lockers, perLocker = 3, 2
	r := &starvation{t: t, key: key(t, "k"), counts: make([]int, lockers*perLocker)}
	var (
		wg   sync.WaitGroup
		warm sync.WaitGroup // every goroutine has taken the key once
	)
	start := make(chan struct{})
	for i := range lockers {
		l := s.locker(t)
		for j := range perLocker {
			g := i*perLocker + j
			warm.Add(1)
			wg.Go(func() {
				err := r.warm(l)
				warm.Done()
				if err != nil {
					r.failed(fmt.Errorf("goroutine %d: first acquisition: %w", g, err))
					return
				}
				<-start
				if err := r.takeTurns(g, l); err != nil {
					r.failed(fmt.Errorf("goroutine %d: %w", g, err))
				}
			})
		}
	}
	warm.Wait()
	close(start)
	wg.Wait()
	return r.counts, r.first
}

// starvationTotal is how many times a starvation round's key changes hands.
const starvationTotal = 180

// starvation is the key of one starvationRound and what its goroutines
// count on it.
type starvation struct {
	t      *testing.T
	key    string
	counts []int // counts[g] is goroutine g's acquisitions, written only by g
	taken  atomic.Int64

	mu   sync.Mutex
	held bool // guarded by mu

	errMu sync.Mutex
	first error // guarded by errMu
}

// failed records err if it is the round's first.
func (r *starvation) failed(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.first == nil {
		r.first = err
	}
}

// warm takes the key once before counting, so that no Locker is still
// opening its connections when the count starts.
func (r *starvation) warm(l lock.Locker) error {
	lease, err := l.Acquire(ctxT(r.t), r.key, lock.WithTTL(5*time.Second))
	if err != nil {
		return err
	}
	return lease.Release(ctxT(r.t))
}

// takeTurns has goroutine g take the key through l and give it back, over
// and over, until it has changed hands starvationTotal times.
func (r *starvation) takeTurns(g int, l lock.Locker) error {
	for r.taken.Load() < starvationTotal {
		lease, err := l.Acquire(ctxT(r.t), r.key, lock.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		r.hold(g)
		if err := lease.Release(ctxT(r.t)); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// hold counts an acquisition of goroutine g and holds the key for a
// millisecond, failing the test if another goroutine holds it meanwhile.
func (r *starvation) hold(g int) {
	r.mu.Lock()
	if r.held {
		r.t.Errorf("goroutine %d holds the key with another", g)
	}
	r.held = true
	r.mu.Unlock()
	r.taken.Add(1)
	r.counts[g]++
	time.Sleep(time.Millisecond)
	r.mu.Lock()
	r.held = false
	r.mu.Unlock()
}

// A stallProbe notices when this process does not run for a while (a loaded
// machine, a stop-the-world pause), so a timing check can tell its own
// lateness from the code's. It wakes every millisecond and records each gap
// longer than stallGap between two wake-ups.
type stallProbe struct {
	mu     sync.Mutex
	stalls [][2]time.Time // guarded by mu
	done   chan struct{}
	wg     sync.WaitGroup
	also   *stallProbe // the server's, or nil; longestIn counts its stalls too
}

const stallGap = 10 * time.Millisecond

func startStallProbe() *stallProbe {
	p := &stallProbe{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		last := time.Now()
		for {
			select {
			case <-p.done:
				return
			case <-time.After(time.Millisecond):
			}
			now := time.Now()
			if now.Sub(last) > stallGap {
				p.mu.Lock()
				p.stalls = append(p.stalls, [2]time.Time{last, now})
				p.mu.Unlock()
			}
			last = now
		}
	}()
	return p
}

// startServerProbe notices when the server does not answer for a while:
// it reads key's lock through in (a read, which queues behind no writer)
// every couple of milliseconds, and records each read that took longer
// than stallGap.
func startServerProbe(in lock.Inspector, key string) *stallProbe {
	p := &stallProbe{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		for {
			select {
			case <-p.done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			begin := time.Now()
			_, _ = in.InspectLock(ctx, key)
			if end := time.Now(); end.Sub(begin) > stallGap {
				p.mu.Lock()
				p.stalls = append(p.stalls, [2]time.Time{begin, end})
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// longestIn returns the longest stall overlapping [from, to], of p or of
// the probe p.also.
func (p *stallProbe) longestIn(from, to time.Time) time.Duration {
	var longest time.Duration
	if p.also != nil {
		longest = p.also.longestIn(from, to)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.stalls {
		if st[1].Before(from) || st[0].After(to) {
			continue
		}
		longest = max(longest, st[1].Sub(st[0]))
	}
	return longest
}

func (p *stallProbe) stop() { close(p.done); p.wg.Wait() }
