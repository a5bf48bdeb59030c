package lock

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock/driver"
)

// fakeBackend lets a test control the order of events, which a real server
// cannot: it counts calls and can hold renewals back. The conformance suite
// runs the same contract against real servers.
type fakeBackend struct {
	mu       sync.Mutex
	held     map[string]string // key -> owner
	token    uint64
	calls    atomic.Int64 // every call that would reach a server
	renews   atomic.Int64
	batches  atomic.Int64
	gate     chan struct{} // when non-nil, Renew waits for it
	renewing chan struct{} // receives when a gated Renew starts
	// deaf makes a gated Renew wait for gate alone, not for its ctx: a
	// renewal whose answer never comes.
	deaf bool
	// returned receives, when non-nil, as each gated Renew returns.
	returned chan struct{}
}

func newFake() *fakeBackend { return &fakeBackend{held: make(map[string]string)} }

func (f *fakeBackend) TryAcquire(_ context.Context, key, owner string, _ time.Duration) (uint64, time.Duration, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.held[key]; ok {
		return 0, 0, ErrNotAcquired
	}
	f.held[key] = owner
	f.token++
	return f.token, 0, nil
}

func (f *fakeBackend) Renew(ctx context.Context, key, owner string, _ time.Duration) error {
	f.calls.Add(1)
	f.renews.Add(1)
	if f.gate != nil {
		f.renewing <- struct{}{}
		if f.returned != nil {
			defer func() { f.returned <- struct{}{} }()
		}
		var done <-chan struct{}
		if !f.deaf {
			done = ctx.Done()
		}
		select {
		case <-f.gate:
		case <-done:
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] != owner {
		return ErrNotHeld
	}
	return nil
}

func (f *fakeBackend) Release(_ context.Context, key, owner string) error {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] != owner {
		return ErrNotHeld
	}
	delete(f.held, key)
	return nil
}

type batchFake struct{ *fakeBackend }

func (b batchFake) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	b.batches.Add(1)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = b.fakeBackend.Renew(ctx, r.Key, r.Owner, r.TTL)
	}
	return errs
}

func TestBadInputTouchesNoServer(t *testing.T) {
	if _, err := NewManager(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewManager(nil) = %v, want ErrInvalid", err)
	}
	f := newFake()
	m, _ := NewManager(f)
	for name, call := range map[string]func() error{
		"empty key":    func() error { _, err := m.Acquire(t.Context(), ""); return err },
		"long key":     func() error { _, err := m.Acquire(t.Context(), string(make([]byte, MaxKeyLen+1))); return err },
		"short TTL":    func() error { _, err := m.Acquire(t.Context(), "k", WithTTL(9*time.Millisecond)); return err },
		"long TTL":     func() error { _, err := m.Acquire(t.Context(), "k", WithTTL(MaxTTL+1)); return err },
		"neg wait":     func() error { _, err := m.Acquire(t.Context(), "k", WithWait(-1)); return err },
		"Do nil fn":    func() error { return Do(t.Context(), m, "k", nil) },
		"Do nil lock":  func() error { return Do(t.Context(), nil, "k", func(context.Context, *Lease) error { return nil }) },
		"Do bad input": func() error { return Do(t.Context(), m, "", func(context.Context, *Lease) error { return nil }) },
	} {
		if err := call(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("bad input made %d backend calls", n)
	}
	// Limits themselves are accepted.
	for _, ttl := range []time.Duration{MinTTL, MaxTTL} {
		l, err := m.Acquire(t.Context(), "k", WithTTL(ttl), WithFixedTTL())
		if err != nil {
			t.Fatalf("TTL %v: %v", ttl, err)
		}
		_ = l.Release(t.Context())
	}
}

// TestReleaseDuringRenewal is the race behind orphan locks (a renewal in
// flight when the holder unlocks, which then re-extends the lock forever):
// after Release, the in-flight renewal's success must change nothing, and no
// renewal may be sent again. The lease is 3 s, its renewal due after 1 s:
// Release comes while that renewal is held back, with 2 s to spare before
// the lease's deadline, which a loaded machine does not use up (at 30 ms,
// a pause of 20 ms made the lease lost and Release fail).
func TestReleaseDuringRenewal(t *testing.T) {
	f := newFake()
	f.gate, f.renewing, f.returned = make(chan struct{}), make(chan struct{}, 1), make(chan struct{}, 1)
	m, _ := NewManager(f)
	lease, err := m.Acquire(t.Context(), "k", WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	<-f.renewing // a renewal is in flight
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	renews := f.renews.Load()
	close(f.gate) // let the renewal complete now
	<-f.returned
	// The renewal's success is applied right after Renew returns; had it
	// revived the lease, the Manager's timer would be armed again and hold
	// the lease for its next renewal, a second from now.
	time.Sleep(100 * time.Millisecond)
	m.mu.Lock()
	armed, scheduled := !m.timerAt.IsZero(), len(m.heap)
	m.mu.Unlock()
	if armed || scheduled != 0 {
		t.Fatalf("after Release and the renewal's success: timer armed %v, %d leases scheduled; want none", armed, scheduled)
	}
	if n := f.renews.Load(); n != renews {
		t.Fatalf("%d renewals sent after Release", n-renews)
	}
	if !errors.Is(lease.Err(), ErrReleased) {
		t.Fatalf("Err = %v, want ErrReleased", lease.Err())
	}
}

// TestUnconfirmedRenewalLosesLease holds back every renewal, whose answer
// never comes: the lease must be declared lost by its local deadline, which
// falls before the server would expire it, and not wait for the answer.
// Order, not a duration, is checked (a bound of TTL + 50 ms on the time to
// Done failed one run in thirty on a loaded machine): the deadline is within
// the TTL, less the drift, of Acquire's return, Done is not closed before it, and
// Done closes while the renewal is still unanswered.
func TestUnconfirmedRenewalLosesLease(t *testing.T) {
	f := newFake()
	f.gate, f.renewing, f.deaf = make(chan struct{}), make(chan struct{}, 100), true
	f.returned = make(chan struct{}, 100)
	defer close(f.gate)
	m, _ := NewManager(f)
	const ttl = 200 * time.Millisecond
	lease, err := m.Acquire(t.Context(), "k", WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	returned := time.Now() // after the server set its expiry
	m.mu.Lock()
	deadline := lease.deadline
	m.mu.Unlock()
	if latest := returned.Add(ttl - DriftMargin(ttl)); deadline.After(latest) {
		t.Fatalf("local deadline %v after the TTL, less the drift, from when Acquire returned", deadline.Sub(latest))
	}
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("lease still held 30 s after its deadline, its renewal unanswered")
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("lease declared lost %v before its deadline", deadline.Sub(now))
	}
	if n := len(f.returned); n != 0 {
		t.Fatalf("%d renewals answered, want none", n)
	}
	if !errors.Is(lease.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	if err := lease.Release(t.Context()); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Release after loss = %v, want ErrNotHeld and ErrLeaseLost", err)
	}
}

// TestReleaseAfterDeadline: a process paused past its lease resumes and
// releases before the scheduler has run. Release must say the lease was lost
// (another holder may have had the lock meanwhile), not that it released it,
// and still delete the lock in case it is ours. The pause is simulated by
// moving the deadline back under the lock, which a real pause would leave
// to chance.
func TestReleaseAfterDeadline(t *testing.T) {
	f := newFake()
	m, _ := NewManager(f)
	lease, err := m.Acquire(t.Context(), "k", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	lease.deadline = time.Now().Add(-time.Millisecond)
	m.mu.Unlock()
	if err := lease.Release(t.Context()); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Release past the deadline = %v, want ErrNotHeld and ErrLeaseLost", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done still open after Release")
	}
	if !errors.Is(lease.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	for f.mu.Lock(); len(f.held) > 0; f.mu.Lock() {
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	f.mu.Unlock()
}

// TestManyLeasesShareOneScheduler holds 10,000 leases: they must cost no
// goroutine each, and with a batch renewer one call per tick renews them all.
func TestManyLeasesShareOneScheduler(t *testing.T) {
	f := newFake()
	m, _ := NewManager(batchFake{f})
	before := runtime.NumGoroutine()
	const n = 10000
	leases := make([]*Lease, n)
	for i := range leases {
		var err error
		leases[i], err = m.Acquire(t.Context(), "k"+string(rune(i+0x100)), WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
	}
	if extra := runtime.NumGoroutine() - before; extra > 5 {
		t.Fatalf("%d extra goroutines for %d leases", extra, n)
	}
	time.Sleep(2500 * time.Millisecond) // about two renewal ticks
	batches, renews := f.batches.Load(), f.renews.Load()
	if renews < n {
		t.Fatalf("only %d renewals for %d leases over two ticks", renews, n)
	}
	// Leases acquired within one tick's span renew together; allow some
	// splitting because they were acquired over a stretch of time.
	if batches > renews/100 {
		t.Fatalf("%d batch calls for %d renewals: not batched", batches, renews)
	}
	for _, l := range leases {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	waitScheduler(t, m)
}

// waitScheduler checks the Manager's timer is stopped once nothing is
// held: within 5 s, which a loaded machine leaves room for. No timer keeps
// the Manager reachable or fires for nothing.
func waitScheduler(t *testing.T, m *Manager) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		armed := !m.timerAt.IsZero()
		m.mu.Unlock()
		if !armed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("timer still armed with no leases held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSchedulerExitsOnLastRelease: with the last lease released, the
// Manager's timer must be stopped now, not left to fire at that lease's
// next renewal (10 s away here).
func TestSchedulerExitsOnLastRelease(t *testing.T) {
	m, _ := NewManager(newFake())
	lease, err := m.Acquire(t.Context(), "k", WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the timer is set for the renewal
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitScheduler(t, m)
}

// partialFake is a driver.BoundedAcquirer whose acquisitions are certain for
// valid only, as when a kept lease is reused without a refresh.
type partialFake struct {
	*fakeBackend
	valid   time.Duration
	partial atomic.Int64 // TryAcquirePartial calls
}

func (p *partialFake) TryAcquirePartial(ctx context.Context, key, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	p.partial.Add(1)
	token, holderTTL, err := p.TryAcquire(ctx, key, owner, ttl)
	return token, p.valid, holderTTL, err
}

// TestPartialAcquisitionRenewedAtOnce: a lock taken with less than two
// thirds of its TTL certain is renewed at once, not a third of the TTL later.
// With renewals held back, the lease must be given up when what was certain
// runs out: an hour's TTL must not hide a 200 ms lease.
func TestPartialAcquisitionRenewedAtOnce(t *testing.T) {
	p := &partialFake{fakeBackend: newFake(), valid: 200 * time.Millisecond}
	p.gate, p.renewing = make(chan struct{}), make(chan struct{}, 100)
	defer close(p.gate)
	m, _ := NewManager(p)
	lease, err := m.Acquire(t.Context(), "k", WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.renewing:
	case <-time.After(30 * time.Second):
		t.Fatal("a lock certain for 200 ms of an hour's TTL was not renewed at once")
	}
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("lease still held long after the 200 ms that were certain, its renewal unconfirmed")
	}
	if !errors.Is(lease.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
}

// TestPartialAcquisitionConfirmed: once the early renewal is confirmed the
// lease runs on its full TTL; and a fixed-TTL lock, which is never renewed,
// is taken with TryAcquire, which owes the full TTL.
func TestPartialAcquisitionConfirmed(t *testing.T) {
	// 2 s certain, for the early renewal's answer to come back on a loaded
	// machine (at 100 ms, a renewal goroutine that did not run for 100 ms
	// lost the lease).
	p := &partialFake{fakeBackend: newFake(), valid: 2 * time.Second}
	m, _ := NewManager(p)
	lease, err := m.Acquire(t.Context(), "k", WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// The confirmed renewal moves the deadline to an hour from its sending.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		left := time.Until(lease.deadline)
		m.mu.Unlock()
		if left > 50*time.Minute {
			break
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("lease lost, %d renewals sent: %v", p.renews.Load(), err)
		}
		if time.Now().After(end) {
			t.Fatalf("%v left on the lease 30 s on, %d renewals sent: not run on its full TTL", left, p.renews.Load())
		}
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("lease lost after its renewal was confirmed: %v", err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.partial.Load() != 1 {
		t.Fatalf("TryAcquirePartial called %d times, want 1", p.partial.Load())
	}
	fixed, err := m.Acquire(t.Context(), "k", WithTTL(time.Hour), WithFixedTTL())
	if err != nil {
		t.Fatal(err)
	}
	if p.partial.Load() != 1 {
		t.Fatal("a fixed-TTL lock was taken with TryAcquirePartial")
	}
	m.mu.Lock()
	left := time.Until(fixed.deadline)
	m.mu.Unlock()
	if left < 50*time.Minute {
		t.Fatalf("fixed-TTL lease of an hour has %v left", left)
	}
	_ = fixed.Release(t.Context())
}

// TestNoGoroutineWhileHolding: between renewals a Manager holding leases
// runs no goroutine (its timer fires a tick when one is due), so taking and
// releasing a lease starts and wakes none.
func TestNoGoroutineWhileHolding(t *testing.T) {
	m, _ := NewManager(newFake())
	var leases []*Lease
	for i := range 3 {
		lease, err := m.Acquire(t.Context(), "k"+strconv.Itoa(i), WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(2 * time.Second)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "lock.(*Manager)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Manager goroutine runs while leases wait for their renewal:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, l := range leases {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// handoverFake is a driver.HandoverReleaser whose hand-overs wait for proceed
// after telling entered, so a test can act while one is on its way: a
// real server cannot hold a release script at that point.
type handoverFake struct {
	*fakeBackend
	entered, proceed chan struct{}
	// fail, when set, is the error of the first failures hand-overs (a
	// connection lost on the way, say), which change nothing; handovers
	// counts every call.
	fail      error
	failures  int64
	handovers atomic.Int64
}

func (h *handoverFake) ReleaseHandover(_ context.Context, key, owner, next string, _ time.Duration) (uint64, error) {
	if n := h.handovers.Add(1); h.fail != nil && n <= h.failures {
		return 0, h.fail
	}
	if h.entered != nil {
		h.entered <- struct{}{}
		<-h.proceed
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[key] != owner {
		return 0, ErrNotHeld
	}
	h.held[key] = next
	h.token++
	return h.token, nil
}

func newHandoverFake() *handoverFake {
	return &handoverFake{fakeBackend: newFake(), entered: make(chan struct{}), proceed: make(chan struct{})}
}

// acquired is what an Acquire started by acquireQueued returned.
type acquired struct {
	lease *Lease
	err   error
}

// acquireQueued starts m.Acquire(ctx, key, opts...) in a goroutine and
// returns once that call waits for key; its result arrives on the channel.
func acquireQueued(ctx context.Context, m *Manager, key string, opts ...Option) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		l, err := m.Acquire(ctx, key, opts...)
		got <- acquired{l, err}
	}()
	for m.Waiting(key) == 0 {
		time.Sleep(time.Millisecond)
	}
	return got
}

// TestHandoverGivesTheWaiterTheLock: a release with a waiter behind it
// takes the lock for the waiter, whose Acquire returns it with the new,
// higher token.
func TestHandoverGivesTheWaiterTheLock(t *testing.T) {
	h := newHandoverFake()
	m, _ := NewManager(h)
	first, err := m.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	got := acquireQueued(t.Context(), m, "k")
	go func() { _ = first.Release(t.Context()) }()
	<-h.entered
	close(h.proceed)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	second := r.lease
	if second.Token() <= first.Token() {
		t.Fatalf("handed-over token %d, not above the releaser's %d", second.Token(), first.Token())
	}
	h.mu.Lock()
	holder := h.held["k"]
	h.mu.Unlock()
	if holder != second.owner {
		t.Fatalf("the lock is %q's, want the waiter's %q", holder, second.owner)
	}
	_ = second.Release(t.Context())
}

// TestHandoverToAWaiterThatGaveUp: when the waiter's Acquire returns (its
// ctx ended) while the release takes the lock for it, the lock is released
// again, not left held until its TTL by nobody.
func TestHandoverToAWaiterThatGaveUp(t *testing.T) {
	h := newHandoverFake()
	m, _ := NewManager(h)
	first, err := m.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := acquireQueued(ctx, m, "k")
	released := make(chan error)
	go func() { released <- first.Release(t.Context()) }()
	<-h.entered
	cancel()
	if r := <-gaveUp; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Acquire after its ctx ended: %v", r.err)
	}
	close(h.proceed)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	holder, held := h.held["k"]
	h.mu.Unlock()
	if held {
		t.Fatalf("the lock taken for the waiter that gave up is still %q's", holder)
	}
}

// TestFailedHandoverIsTriedOnce: a release whose hand-over to a waiter
// fails (the connection broke on the way, so the lock may or may not have
// changed hands) gives back what the waiter may have been given with a
// plain release, and reports the error. It does not hand the lock over
// again, from the waiter to the waiter: while the error lasted (a database
// that went away), that looped until the stack overflowed and the process
// died.
func TestFailedHandoverIsTriedOnce(t *testing.T) {
	lost := errors.New("connection reset")
	h := &handoverFake{fakeBackend: newFake(), fail: lost, failures: 50}
	m, _ := NewManager(h)
	first, err := m.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waited := acquireQueued(ctx, m, "k")
	if err := first.Release(t.Context()); !errors.Is(err, lost) {
		t.Fatalf("release whose hand-over failed: %v, want %v", err, lost)
	}
	if n := h.handovers.Load(); n != 1 {
		t.Fatalf("%d hand-overs for one release, want 1", n)
	}
	cancel()
	if r := <-waited; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the waiter: %v", r.err)
	}
}

// TestHandedOverAcquireReportsItsWait: an Acquire that queued behind
// another waiter, made no attempt, and got the lock from a release reports
// the time it waited, not 0 ("decided by the first attempt").
func TestHandedOverAcquireReportsItsWait(t *testing.T) {
	h := &handoverFake{fakeBackend: newFake()}
	m, _ := NewManager(h)
	var mu sync.Mutex
	var events []Event
	m.SetObserver(func(e Event) {
		if e.Kind == EventAcquire {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	})
	first, err := m.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lease, 2)
	for i := range 2 {
		go func() {
			lease, err := m.Acquire(t.Context(), "k")
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		for m.Waiting("k") <= i {
			time.Sleep(time.Millisecond)
		}
	}
	_ = first.Release(t.Context())
	second := <-got
	_ = second.Release(t.Context())
	third := <-got
	_ = third.Release(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 {
		t.Fatalf("%d acquire events, want 3", len(events))
	}
	for _, e := range events[1:] {
		if e.Err != nil || e.Waited <= 0 {
			t.Errorf("handed-over acquire: Err %v, Waited %v (Attempts %d), want a wait", e.Err, e.Waited, e.Attempts)
		}
	}
}
