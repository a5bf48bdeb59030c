// Package semaphoretest is the conformance suite every semaphore backend
// passes against a real server. A backend is done when Run passes.
//
//	func TestSemaphoreConformance(t *testing.T) {
//		semaphoretest.Run(t, semaphoretest.Harness{
//			New:    func(t *testing.T) *semaphore.Client { ... },
//			Revoke: func(t *testing.T, name string) { ... },
//		})
//	}
package semaphoretest

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// Harness describes a backend under test.
type Harness struct {
	// New returns a new Client with its own connection(s) to the server. It
	// is called several times per test to model separate processes. The
	// suite closes it at the end of the test.
	New func(t *testing.T) *semaphore.Client

	// Revoke deletes every permit of name behind its holders' backs, as an
	// operator, an eviction or a failover would.
	Revoke func(t *testing.T, name string)

	// Cut, if set, cuts c (a Client New returned) off from the server for
	// good, as a crash of its process would: typically it closes c's
	// connection. The permits c holds stay on the server until their TTL
	// runs out; the suite checks that they come back then, and never
	// before. Nil skips that test.
	Cut func(t *testing.T, c *semaphore.Client)

	// TTL is the short lease the suite uses where renewal or expiry must
	// happen during a test. Default: 1 s.
	TTL time.Duration

	// MaxTTL, if set, is the longest TTL the backend accepts (ZooKeeper:
	// the session timeout); the suite's long leases, 10 to 30 s, are cut
	// to it. They are renewed, so they still outlive the tests.
	MaxTTL time.Duration

	// NoOperator says the backend cannot list semaphores or break a
	// holder yet: the suite then checks that List and Break say so
	// (lock.ErrUnsupported) instead of checking what they do.
	NoOperator bool
}

// eventually bounds waits for things that must happen; it is a failure
// timeout, not a performance target.
const eventually = 15 * time.Second

// Run runs the whole suite; subtests run in parallel with unique names.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Revoke == nil {
		t.Fatal("semaphoretest: Harness.New and Harness.Revoke are required")
	}
	s := &suite{h: h, ttl: cmp.Or(h.TTL, time.Second)}
	suitekit.Cases{
		{"BadInput", s.badInput},
		{"CountMismatch", s.countMismatch},
		{"NeverMoreThanN", s.neverMoreThanN},
		{"SeveralPermitsAllOrNone", s.allOrNone},
		{"TryOnce", s.tryOnce},
		{"WaitLimit", s.waitLimit},
		{"ContextCancelWhileWaiting", s.ctxCancel},
		{"WaiterWakesOnRelease", s.wakeOnRelease},
		{"FreePermitsFilledInOrder", s.arrivalOrder},
		{"ReleaseTwice", s.releaseTwice},
		{"ReleaseOnlyOwnPermit", s.releaseOwn},
		{"FixedTTLExpires", s.fixedTTL},
		{"RenewalKeepsPermit", s.renewal},
		{"DoneWhenRevoked", s.revoked},
		{"DoCancelsOnLoss", s.doCancels},
		{"TokensIncrease", s.tokensIncrease},
		{"Inspect", s.inspect},
		{"OperatorListsAndBreaks", s.operator},
		{"DeadHolderPermitReturnsAtExpiry", s.deadHolder},
	}.RunParallel(t)
}

type suite struct {
	h   Harness
	ttl time.Duration
}

// long returns the option of a long lease of d, at most Harness.MaxTTL.
func (s *suite) long(d time.Duration) lock.Option {
	if s.h.MaxTTL > 0 && d > s.h.MaxTTL {
		d = s.h.MaxTTL
	}
	return lock.WithTTL(d)
}

// opts puts a long lease before opts, which may choose another TTL: the
// default TTL, 30 s, may be more than the backend accepts.
func (s *suite) opts(opts []lock.Option) []lock.Option {
	return append([]lock.Option{s.long(lock.DefaultTTL)}, opts...)
}

func (s *suite) client(t *testing.T) *semaphore.Client {
	t.Helper()
	return suitekit.Made(t, s.h.New(t))
}

// name returns a semaphore name unique to this test and run.
func name(t *testing.T) string { return suitekit.Name(t, "semtest", ":") }

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 60*time.Second) }

func sem(t *testing.T, c *semaphore.Client, name string, n int) *semaphore.Semaphore {
	t.Helper()
	s, err := c.Semaphore(name, n)
	if err != nil {
		t.Fatalf("Semaphore(%q, %d): %v", name, n, err)
	}
	return s
}

func (su *suite) take(t *testing.T, s *semaphore.Semaphore, k int, opts ...lock.Option) *semaphore.Permit {
	t.Helper()
	p, err := s.AcquireN(ctxT(t), k, su.opts(opts)...)
	if err != nil {
		t.Fatalf("AcquireN(%d of %d): %v", k, s.Permits(), err)
	}
	if p.Key() != s.Name() || p.Count() != k || p.Err() != nil {
		t.Fatalf("fresh permit: Key %q Count %d Err %v, want %q, %d, nil", p.Key(), p.Count(), p.Err(), s.Name(), k)
	}
	return p
}

// full checks that k permits of s cannot be taken now.
func (su *suite) full(t *testing.T, s *semaphore.Semaphore, k int, why string) {
	t.Helper()
	p, err := s.AcquireN(ctxT(t), k, su.opts([]lock.Option{lock.WithWait(0)})...)
	if !errors.Is(err, lock.ErrNotAcquired) {
		if p != nil {
			_ = p.Release(ctxT(t))
		}
		t.Fatalf("%s: try-once of %d = %v, want ErrNotAcquired", why, k, err)
	}
}

func (s *suite) badInput(t *testing.T) {
	c := s.client(t)
	n := name(t)
	for _, bad := range []struct {
		what    string
		name    string
		permits int
	}{
		{"N = 0", n, 0},
		{"N < 0", n, -1},
		{"N too large", n, semaphore.MaxPermits + 1},
		{"empty name", "", 2},
		{"name too long", strings.Repeat("n", semaphore.MaxNameLen+1), 2},
	} {
		if got, err := c.Semaphore(bad.name, bad.permits); !errors.Is(err, lock.ErrInvalid) || got != nil {
			t.Errorf("%s: Semaphore = (%v, %v), want ErrInvalid", bad.what, got, err)
		}
	}
	if _, err := c.Inspect(ctxT(t), ""); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Inspect of an empty name = %v, want ErrInvalid", err)
	}
	sm := sem(t, c, n, 2)
	for _, bad := range []struct {
		what string
		k    int
		opts []lock.Option
	}{
		{"k > N", 3, nil},
		{"k = 0", 0, nil},
		{"k < 0", -1, nil},
		{"TTL too short", 1, []lock.Option{lock.WithTTL(time.Millisecond)}},
		{"negative wait", 1, []lock.Option{lock.WithWait(-time.Second)}},
	} {
		if p, err := sm.AcquireN(ctxT(t), bad.k, bad.opts...); !errors.Is(err, lock.ErrInvalid) || p != nil {
			t.Errorf("%s: AcquireN = (%v, %v), want ErrInvalid", bad.what, p, err)
		}
	}
	if err := sm.Do(ctxT(t), nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Do(nil) = %v, want ErrInvalid", err)
	}
	// Nothing was taken: both permits are free.
	suitekit.Release(t, s.take(t, sm, 2, lock.WithWait(0)))
}

// countMismatch checks that a party with another N is refused while the
// name is held, takes nothing, and that the name may change its N once free.
func (s *suite) countMismatch(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	two := s.take(t, sem(t, a, n, 2), 1)
	for _, other := range []int{1, 3} {
		p, err := sem(t, b, n, other).Acquire(ctxT(t), s.opts([]lock.Option{lock.WithWait(time.Second)})...)
		var me *semaphore.MismatchError
		if !errors.Is(err, semaphore.ErrMismatch) || p != nil {
			t.Fatalf("Acquire with N=%d while held with N=2 = (%v, %v), want ErrMismatch", other, p, err)
		}
		if errors.As(err, &me) && (me.Asked != other || me.Holders != 2) {
			t.Fatalf("MismatchError = %+v, want asked %d, held with 2", me, other)
		}
	}
	// The refused parties took nothing: the second permit is still free.
	second := s.take(t, sem(t, b, n, 2), 1, lock.WithWait(0))
	suitekit.Release(t, two)
	suitekit.Release(t, second)
	// Free again: another N is accepted, and then holds.
	three := s.take(t, sem(t, b, n, 3), 3, lock.WithWait(0))
	if _, err := sem(t, a, n, 2).Acquire(ctxT(t), s.opts([]lock.Option{lock.WithWait(0)})...); !errors.Is(err, semaphore.ErrMismatch) {
		t.Fatalf("Acquire with N=2 while held with N=3 = %v, want ErrMismatch", err)
	}
	suitekit.Release(t, three)
}

// neverMoreThanN runs holders from several Clients and goroutines, taking
// one or two permits, and counts the permits held on every enter and leave:
// the count must never pass N, and must pass 1 (a semaphore, not a lock).
func (s *suite) neverMoreThanN(t *testing.T) {
	const clients, perClient, rounds, permits = 3, 4, 6, 3
	n := name(t)
	hall := hall{permits: permits}
	var wg sync.WaitGroup
	for range clients {
		c := s.client(t)
		sm := sem(t, c, n, permits)
		for g := range perClient {
			k := 1 + g%2
			wg.Go(func() {
				for range rounds {
					if !hall.visit(t, sm, k, s.long(10*time.Second)) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if k := hall.over.Load(); k > 0 {
		t.Fatalf("%d times more than %d permits were held at once", k, permits)
	}
	if m := hall.most.Load(); m < 2 {
		t.Fatalf("at most %d permit(s) were held at once by %d holders: the semaphore serialised them", m, clients*perClient)
	}
}

// A hall counts the permits neverMoreThanN's holders hold at once.
type hall struct {
	permits      int64
	inside, most atomic.Int64
	over         atomic.Int64 // more than permits inside, or fewer than none
}

// visit takes k permits of sm, stays a moment and gives them back; false
// after a failure, which it reports.
func (h *hall) visit(t *testing.T, sm *semaphore.Semaphore, k int, opt lock.Option) bool {
	p, err := sm.AcquireN(ctxT(t), k, opt)
	if err != nil {
		t.Errorf("AcquireN(%d): %v", k, err)
		return false
	}
	now := h.inside.Add(int64(k))
	if now > h.permits {
		h.over.Add(1)
	}
	for m := h.most.Load(); now > m && !h.most.CompareAndSwap(m, now); m = h.most.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	if now := h.inside.Add(-int64(k)); now < 0 {
		h.over.Add(1)
	}
	if err := p.Release(ctxT(t)); err != nil {
		t.Errorf("Release: %v", err)
		return false
	}
	return true
}

// allOrNone takes k permits at once: never part of them.
func (s *suite) allOrNone(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	sa, sb := sem(t, a, n, 4), sem(t, b, n, 4)
	three := s.take(t, sa, 3)
	s.full(t, sb, 2, "3 of 4 held")
	one := s.take(t, sb, 1, lock.WithWait(0))
	s.full(t, sb, 1, "4 of 4 held")
	suitekit.Release(t, three)
	// The failed attempts took nothing: three are free again.
	suitekit.Release(t, s.take(t, sb, 3, lock.WithWait(0)))
	suitekit.Release(t, one)
}

func (s *suite) tryOnce(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	sa, sb := sem(t, a, n, 2), sem(t, b, n, 2)
	p1, p2 := s.take(t, sa, 1, s.long(10*time.Second)), s.take(t, sb, 1, lock.WithWait(0))
	_, err := sb.Acquire(ctxT(t), s.opts([]lock.Option{lock.WithWait(0)})...)
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once with every permit held = %v, want ErrNotAcquired", err)
	}
	var held *lock.HeldError
	if errors.As(err, &held) && (held.TimeLeft <= 0 || held.TimeLeft > 30*time.Second) {
		t.Fatalf("HeldError.TimeLeft = %v for leases of at most 30 s", held.TimeLeft)
	}
	suitekit.Release(t, p1)
	suitekit.Release(t, s.take(t, sb, 1, lock.WithWait(0)))
	suitekit.Release(t, p2)
}

func (s *suite) waitLimit(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	held := s.take(t, sem(t, a, n, 1), 1, s.long(20*time.Second))
	defer suitekit.Release(t, held)
	const wait = 200 * time.Millisecond
	start := time.Now()
	_, err := sem(t, b, n, 1).Acquire(ctxT(t), s.opts([]lock.Option{lock.WithWait(wait)})...)
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Acquire with a wait limit = %v, want ErrNotAcquired", err)
	}
	if elapsed := time.Since(start); elapsed < wait {
		t.Fatalf("gave up after %v, before the %v wait limit", elapsed, wait)
	}
	suitekit.NotDone(t, held)
}

func (s *suite) ctxCancel(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	held := s.take(t, sem(t, a, n, 2), 2, s.long(20*time.Second))
	defer suitekit.Release(t, held)
	sb := sem(t, b, n, 2)
	ctx, cancel := context.WithCancel(ctxT(t))
	time.AfterFunc(150*time.Millisecond, cancel)
	if _, err := sb.Acquire(ctx, s.opts(nil)...); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled while waiting = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(ctxT(t), 150*time.Millisecond)
	defer cancel()
	if _, err := sb.Acquire(ctx, s.opts(nil)...); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its ctx deadline = %v, want context.DeadlineExceeded", err)
	}
	if sb.Waiting() != 0 {
		t.Fatalf("%d waiters left after the cancelled Acquire calls", sb.Waiting())
	}
}

// wakeOnRelease checks that a waiter of another Client gets a permit soon
// after a release, not when the holders' TTLs run out.
func (s *suite) wakeOnRelease(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	const ttl = 30 * time.Second
	sa := sem(t, a, n, 2)
	p1, p2 := s.take(t, sa, 1, s.long(ttl)), s.take(t, sa, 1, s.long(ttl))
	got := make(chan *semaphore.Permit, 1)
	go func() {
		p, err := sem(t, b, n, 2).Acquire(ctxT(t), s.opts([]lock.Option{lock.WithWait(ttl / 2)})...)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- p
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter took a permit while all were held")
	default:
	}
	suitekit.Release(t, p1)
	p := <-got
	if p == nil {
		return
	}
	if p.Token() <= p2.Token() {
		t.Fatalf("waiter's token %d <= an earlier holder's %d", p.Token(), p2.Token())
	}
	suitekit.Release(t, p)
	suitekit.Release(t, p2)
}

// arrivalOrder queues waiters of one Client one after the other behind a
// full semaphore, then frees permits: they are served in arrival order, and
// a release of several permits at once serves several waiters.
func (s *suite) arrivalOrder(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	const waiters = 4
	sa, sb := sem(t, a, n, 3), sem(t, b, n, 3)
	all := s.take(t, sa, 3, s.long(30*time.Second))
	type grant struct {
		i int
		p *semaphore.Permit
	}
	got := make(chan grant, waiters)
	for i := range waiters {
		go func() {
			p, err := sb.Acquire(ctxT(t), s.long(30*time.Second), lock.WithWait(eventually))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			got <- grant{i, p}
		}()
		deadline := time.Now().Add(eventually)
		for sb.Waiting() < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Three permits free at once: the first three waiters take them.
	suitekit.Release(t, all)
	var order []int
	var held []*semaphore.Permit
	for range 3 {
		g := <-got
		if g.p == nil {
			t.FailNow()
		}
		order = append(order, g.i)
		held = append(held, g.p)
	}
	slices.Sort(order)
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Fatalf("the three freed permits went to waiters %v, want the first three arrivals", order)
	}
	suitekit.Release(t, held[0])
	if g := <-got; g.p == nil || g.i != 3 {
		t.Fatalf("the last waiter did not get the next freed permit")
	} else {
		suitekit.Release(t, g.p)
	}
	for _, p := range held[1:] {
		suitekit.Release(t, p)
	}
}

func (s *suite) releaseTwice(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	sa, sb := sem(t, a, n, 2), sem(t, b, n, 2)
	p := s.take(t, sa, 1)
	suitekit.Release(t, p)
	if err := p.Release(ctxT(t)); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if !errors.Is(p.Err(), lock.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", p.Err())
	}
	// Others hold both permits now; a third Release must free neither.
	o1, o2 := s.take(t, sb, 1, lock.WithWait(0)), s.take(t, sb, 1, lock.WithWait(0))
	if err := p.Release(ctxT(t)); err != nil {
		t.Fatalf("third Release = %v", err)
	}
	s.full(t, sa, 1, "after a repeated Release")
	suitekit.Release(t, o1)
	suitekit.Release(t, o2)
}

func (s *suite) releaseOwn(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	first := s.take(t, sem(t, a, n, 1), 1, lock.WithTTL(s.ttl))
	s.h.Revoke(t, n)
	second := s.take(t, sem(t, b, n, 1), 1, s.long(10*time.Second), lock.WithWait(eventually))
	if err := first.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale holder's Release = %v, want ErrNotHeld", err)
	}
	s.full(t, sem(t, a, n, 1), 1, "after a stale Release")
	suitekit.NotDone(t, second)
	suitekit.Release(t, second)
}

func (s *suite) fixedTTL(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	p := s.take(t, sem(t, a, n, 1), 1, lock.WithTTL(s.ttl), lock.WithFixedTTL())
	suitekit.WaitDone(t, p, eventually)
	if !errors.Is(p.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err after expiry = %v, want ErrLeaseLost", p.Err())
	}
	next := s.take(t, sem(t, b, n, 1), 1, lock.WithWait(eventually))
	if next.Token() <= p.Token() {
		t.Fatalf("token after expiry %d <= expired holder's %d", next.Token(), p.Token())
	}
	if err := p.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of an expired permit = %v, want ErrNotHeld", err)
	}
	suitekit.NotDone(t, next)
	suitekit.Release(t, next)
}

func (s *suite) renewal(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := name(t)
	p := s.take(t, sem(t, a, n, 2), 2, lock.WithTTL(s.ttl))
	time.Sleep(4 * s.ttl)
	suitekit.NotDone(t, p)
	s.full(t, sem(t, b, n, 2), 1, "renewed permits after 4 TTLs")
	suitekit.Release(t, p)
}

func (s *suite) revoked(t *testing.T) {
	c := s.client(t)
	n := name(t)
	p := s.take(t, sem(t, c, n, 3), 2, lock.WithTTL(s.ttl))
	s.h.Revoke(t, n)
	suitekit.WaitDone(t, p, eventually)
	if !errors.Is(p.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err after revocation = %v, want ErrLeaseLost", p.Err())
	}
	if err := p.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after loss = %v, want ErrNotHeld", err)
	}
}

func (s *suite) doCancels(t *testing.T) {
	c := s.client(t)
	n := name(t)
	err := sem(t, c, n, 2).Do(ctxT(t), func(ctx context.Context, p *semaphore.Permit) error {
		s.h.Revoke(t, n)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(eventually):
			return errors.New("ctx not cancelled after the permit was revoked")
		}
	}, lock.WithTTL(s.ttl))
	var lost *lock.LostError
	if !errors.As(err, &lost) || !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("Do with a revoked permit = %v, want a *lock.LostError", err)
	}
}

// tokensIncrease takes permits from several Clients at once and one after
// another: every token is new, and a later acquisition's is higher.
func (s *suite) tokensIncrease(t *testing.T) {
	n := name(t)
	const clients, each = 3, 5
	var (
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
	)
	for range clients {
		sm := sem(t, s.client(t), n, 4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for range each {
				p, err := sm.Acquire(ctxT(t), s.opts(nil)...)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if p.Token() <= last {
					t.Errorf("token %d after this Client's earlier %d", p.Token(), last)
				}
				last = p.Token()
				mu.Lock()
				tokens = append(tokens, p.Token())
				mu.Unlock()
				if err := p.Release(ctxT(t)); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(tokens)
	if len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Fatalf("a token was issued twice: %v", tokens)
	}
	after := s.take(t, sem(t, s.client(t), n, 4), 4)
	if len(tokens) > 0 && after.Token() <= tokens[len(tokens)-1] {
		t.Fatalf("token %d after %d", after.Token(), tokens[len(tokens)-1])
	}
	suitekit.Release(t, after)
}

func (s *suite) inspect(t *testing.T) {
	c := s.client(t)
	n := name(t)
	info, err := c.Inspect(ctxT(t), n)
	if errors.Is(err, lock.ErrUnsupported) {
		t.Skip("backend cannot inspect semaphores")
	}
	if err != nil || len(info.Holders) != 0 || info.Used != 0 {
		t.Fatalf("Inspect of a free semaphore = (%+v, %v), want no holders", info, err)
	}
	sm := sem(t, c, n, 5)
	p1 := s.take(t, sm, 2, lock.WithHolder("report job 1"), s.long(20*time.Second))
	p2 := s.take(t, sm, 1, s.long(20*time.Second))
	info, err = c.Inspect(ctxT(t), n)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if info.Name != n || info.Permits != 5 || info.Used != 3 || len(info.Holders) != 2 {
		t.Fatalf("Inspect = %+v, want N 5, 3 used by 2 holders", info)
	}
	h := map[uint64]semaphore.HolderInfo{}
	for _, x := range info.Holders {
		h[x.Token] = x
	}
	if x := h[p1.Token()]; x.Holder != "report job 1" || x.Count != 2 ||
		x.TimeLeft != lock.Unknown && (x.TimeLeft <= 0 || x.TimeLeft > 20*time.Second) {
		t.Fatalf("first holder = %+v, want label, 2 permits, time left (or lock.Unknown)", x)
	}
	if x := h[p2.Token()]; x.Holder != "" || x.Count != 1 {
		t.Fatalf("second holder = %+v, want no label, 1 permit", x)
	}
	suitekit.Release(t, p1)
	suitekit.Release(t, p2)
	if info, err = c.Inspect(ctxT(t), n); err != nil || len(info.Holders) != 0 || info.Permits != 0 {
		t.Fatalf("Inspect after release = (%+v, %v), want no holders and no N", info, err)
	}
}

// deadHolder cuts a holder off with its permits held: a waiter gets them
// after their TTL, and never before.
func (s *suite) deadHolder(t *testing.T) {
	if s.h.Cut == nil {
		t.Skip("backend has no connection to cut (Harness.Cut is nil)")
	}
	dead, alive := s.client(t), s.client(t)
	n := name(t)
	begin := time.Now()
	p := s.take(t, sem(t, dead, n, 2), 2, lock.WithTTL(s.ttl))
	s.h.Cut(t, dead)
	got, err := sem(t, alive, n, 2).AcquireN(ctxT(t), 2, s.opts([]lock.Option{lock.WithWait(eventually)})...)
	if err != nil {
		t.Fatalf("waiter for a dead holder's permits: %v", err)
	}
	// The server counts the TTL from its millisecond clock.
	if early := begin.Add(s.ttl - 2*time.Millisecond); time.Now().Before(early) {
		t.Fatalf("a dead holder's permits came back %v before its TTL ended", time.Until(early))
	}
	if got.Token() <= p.Token() {
		t.Fatalf("token %d after the dead holder's %d", got.Token(), p.Token())
	}
	suitekit.Release(t, got)
}

// operator: List finds a semaphore by its prefix, with its holders; Break
// takes one holder's permits back, the holder learning it by Done, the
// permits free for others, and every later token is higher.
func (s *suite) operator(t *testing.T) {
	c, op := s.client(t), s.client(t)
	n := name(t)
	if s.h.NoOperator {
		if _, err := op.List(ctxT(t), n, 10, ""); !errors.Is(err, lock.ErrUnsupported) {
			t.Fatalf("List on a backend said to have no operator's view: %v, want lock.ErrUnsupported", err)
		}
		if _, err := op.Break(ctxT(t), n, 1, "ops", quiet); !errors.Is(err, lock.ErrUnsupported) {
			t.Fatalf("Break on a backend said to have no operator's view: %v, want lock.ErrUnsupported", err)
		}
		return
	}
	sm := sem(t, c, n, 3)
	p1 := s.take(t, sm, 1, lock.WithHolder("report job 1"), lock.WithTTL(s.ttl))
	p2 := s.take(t, sm, 2, lock.WithHolder("report job 2"), lock.WithTTL(s.ttl))
	page, err := op.List(ctxT(t), n, lock.MaxListLimit, "")
	for err == nil && len(page.Semaphores) == 0 && page.Cursor != "" {
		page, err = op.List(ctxT(t), n, lock.MaxListLimit, page.Cursor)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Semaphores) != 1 || page.Semaphores[0].Name != n || page.Semaphores[0].Used != 3 || len(page.Semaphores[0].Holders) != 2 {
		t.Fatalf("List(%q) = %+v, want %q with 3 permits used by 2 holders", n, page.Semaphores, n)
	}
	if _, err := op.Break(ctxT(t), n, p2.Token(), "", nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Break without who asked: %v, want lock.ErrInvalid", err)
	}
	if _, err := op.Break(ctxT(t), n, p2.Token()+1000, "ops", quiet); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Break of a token nobody holds: %v, want lock.ErrNotHeld", err)
	}
	h, err := op.Break(ctxT(t), n, p2.Token(), "ops", quiet)
	if err != nil || h.Holder != "report job 2" || h.Token != p2.Token() || h.Count != 2 {
		t.Fatalf("Break of report job 2 = %+v, %v", h, err)
	}
	suitekit.WaitDone(t, p2, 20*time.Second) // the broken holder
	suitekit.NotDone(t, p1)                  // the holder not broken
	p3 := s.take(t, sem(t, op, n, 3), 2, lock.WithWait(0))
	if p3.Token() <= p2.Token() {
		t.Fatalf("the next holder's token %d is not above the broken holder's %d", p3.Token(), p2.Token())
	}
	suitekit.Release(t, p3)
	suitekit.Release(t, p1)
}

// quiet takes the breaks' log lines.
var quiet = slog.New(slog.DiscardHandler)
