// Package rwlocktest is the conformance suite every read-write lock backend
// passes against a real server. A backend is done when Run passes, and,
// for a backend whose locks are shared between processes, RunProcesses.
//
//	func TestConformance(t *testing.T) {
//		rwlocktest.Run(t, rwlocktest.Harness{
//			New: func(t *testing.T) *rwlock.Locker { ... },
//		})
//	}
package rwlocktest

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// Harness describes a backend under test.
type Harness struct {
	// New returns a new Locker with its own connection(s) to the server. It
	// is called several times per test to model separate processes. The
	// suite closes each Locker at the end of the test.
	New func(t *testing.T) *rwlock.Locker

	// TTL is the short lease the suite uses where renewal or expiry must
	// happen during a test. Default: 1 s.
	TTL time.Duration

	// NoOperator says the backend cannot list read-write locks or break a
	// holder yet: the suite then checks that List and Break say so
	// (lock.ErrUnsupported) instead of checking what they do.
	NoOperator bool
}

// defaultTTL is Harness.TTL's default.
const defaultTTL = time.Second

// starveWait is how long a writer waits among readers before the suite
// calls it starved.
const starveWait = 10 * time.Second

// eventually bounds waits for things that must happen; it is a failure
// timeout, not a performance target.
const eventually = 20 * time.Second

// Run runs the suite. Subtests run in parallel with unique names, except the
// goroutine-leak test, which runs alone.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("rwlocktest: Harness.New is required")
	}
	s := &suite{h: h, ttl: cmp.Or(h.TTL, defaultTTL)}
	t.Run("NoGoroutineLeaks", s.noGoroutineLeaks)
	t.Run("Contract", func(t *testing.T) {
		suitekit.Cases{
			{"BadInput", s.badInput},
			{"ReadersShare", s.readersShare},
			{"ReadersOverlap", s.readersOverlap},
			{"WriterExcludes", s.writerExcludes},
			{"WriterAlone", s.writerAlone},
			{"WaitingWriterBlocksNewReaders", s.waitingWriterBlocks},
			{"WriterNotStarved", s.writerNotStarved},
			{"GivenUpWriterLetsReadersIn", s.givenUpWriter},
			{"ContextCancelWhileWaiting", s.ctxCancel},
			{"ReleaseTwice", s.releaseTwice},
			{"RenewalKeepsBothModes", s.renewal},
			{"FixedTTLReaderExpires", s.fixedReader},
			{"Tokens", s.tokens},
			{"DoWithReaders", s.doReaders},
			{"Inspect", s.inspect},
			{"OperatorListsAndBreaks", s.operator},
		}.RunParallel(t)
	})
}

type suite struct {
	h   Harness
	ttl time.Duration
}

func (s *suite) locker(t *testing.T) *rwlock.Locker {
	t.Helper()
	return suitekit.Made(t, s.h.New(t))
}

// name returns a lock name unique to this test and run.
func name(t *testing.T) string { return suitekit.Name(t, "rwlocktest", ":") }

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 60*time.Second) }

// take acquires name in mode and fails t if it cannot.
func take(t *testing.T, l *rwlock.Locker, mode rwlock.Mode, name string, opts ...lock.Option) *lock.Lease {
	t.Helper()
	lease, err := acquire(ctxT(t), l, mode, name, opts...)
	if err != nil {
		t.Fatalf("%v lock of %q: %v", mode, name, err)
	}
	if lease.Err() != nil {
		t.Fatalf("fresh lease has Err() = %v", lease.Err())
	}
	return lease
}

func acquire(ctx context.Context, l *rwlock.Locker, mode rwlock.Mode, name string, opts ...lock.Option) (*lock.Lease, error) {
	if mode == rwlock.Read {
		return l.RLock(ctx, name, opts...)
	}
	return l.Lock(ctx, name, opts...)
}

// refused checks that a try-once attempt in mode is refused as held.
func refused(t *testing.T, l *rwlock.Locker, mode rwlock.Mode, name, why string, opts ...lock.Option) {
	t.Helper()
	lease, err := acquire(ctxT(t), l, mode, name, append(opts, lock.WithWait(0))...)
	if err == nil {
		_ = lease.Release(ctxT(t))
		t.Fatalf("%v try-once succeeded %s", mode, why)
	}
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("%v try-once %s = %v, want ErrNotAcquired", mode, why, err)
	}
}

// waitWaiting returns once a writer of l waits for name: its first attempt
// failed, so its intent is recorded.
func waitWaiting(t *testing.T, l *rwlock.Locker, name string) {
	t.Helper()
	w := l.Writers().(interface{ Waiting(key string) int })
	for end := time.Now().Add(eventually); w.Waiting(name) < 1; {
		if time.Now().After(end) {
			t.Fatalf("no writer waits for %q after %v", name, eventually)
		}
		time.Sleep(time.Millisecond)
	}
}

// A later is a Lock running in the background.
type later struct {
	done  chan struct{}
	lease *lock.Lease // set when done is closed
	err   error
}

// lockLater starts Lock of name on l in the background. If the test ends
// first, the Lock is cancelled and its lease released.
func lockLater(t *testing.T, l *rwlock.Locker, name string, opts ...lock.Option) *later {
	lt := &later{done: make(chan struct{})}
	go func() {
		defer close(lt.done)
		lt.lease, lt.err = l.Lock(t.Context(), name, opts...)
	}()
	t.Cleanup(func() {
		<-lt.done
		if lt.lease != nil {
			_ = lt.lease.Release(context.Background())
		}
	})
	return lt
}

// wait returns the background Lock's lease, failing t if it failed.
func (lt *later) wait(t *testing.T) *lock.Lease {
	t.Helper()
	select {
	case <-lt.done:
	case <-time.After(eventually):
		t.Fatalf("waiting writer not in after %v", eventually)
	}
	if lt.err != nil {
		t.Fatalf("waiting writer: %v", lt.err)
	}
	return lt.lease
}

func (s *suite) badInput(t *testing.T) {
	l := s.locker(t)
	ctx := ctxT(t)
	n := name(t)
	cases := []struct {
		name string
		key  string
		opts []lock.Option
	}{
		{"empty name", "", nil},
		{"name too long", strings.Repeat("n", lock.MaxKeyLen+1), nil},
		{"TTL too short", n, []lock.Option{lock.WithTTL(time.Millisecond)}},
		{"TTL too long", n, []lock.Option{lock.WithTTL(25 * time.Hour)}},
		{"negative wait", n, []lock.Option{lock.WithWait(-time.Second)}},
	}
	for _, mode := range []rwlock.Mode{rwlock.Read, rwlock.Write} {
		for _, c := range cases {
			lease, err := acquire(ctx, l, mode, c.key, c.opts...)
			if !errors.Is(err, lock.ErrInvalid) || lease != nil {
				t.Errorf("%v, %s: = (%v, %v), want ErrInvalid", mode, c.name, lease, err)
			}
		}
	}
	if _, err := l.Inspect(ctx, ""); !errors.Is(err, lock.ErrInvalid) && !errors.Is(err, lock.ErrUnsupported) {
		t.Errorf("Inspect of an empty name = %v, want ErrInvalid", err)
	}
	if _, err := rwlock.New(nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	// Nothing was taken: a writer gets in at once.
	suitekit.Release(t, take(t, l, rwlock.Write, n, lock.WithWait(0)))
}

// readersShare: readers of several Lockers hold one name at once, each
// taken by a try-once attempt.
func (s *suite) readersShare(t *testing.T) {
	n := name(t)
	var leases []*lock.Lease
	for range 4 {
		leases = append(leases, take(t, s.locker(t), rwlock.Read, n, lock.WithWait(0)))
	}
	l := s.locker(t)
	leases = append(leases, take(t, l, rwlock.Read, n, lock.WithWait(0)), take(t, l, rwlock.Read, n, lock.WithWait(0)))
	refused(t, l, rwlock.Write, n, "while six readers hold")
	for _, lease := range leases {
		suitekit.Release(t, lease)
	}
	suitekit.Release(t, take(t, l, rwlock.Write, n, lock.WithWait(0)))
}

// readersOverlap: readers that arrive together while a writer holds all
// get in when it leaves, and all hold at one moment: none waits for another.
func (s *suite) readersOverlap(t *testing.T) {
	const readers = 6
	n := name(t)
	w := take(t, s.locker(t), rwlock.Write, n)
	var (
		inside, most atomic.Int32
		all          = make(chan struct{})
		wg           sync.WaitGroup
	)
	lockers := []*rwlock.Locker{s.locker(t), s.locker(t)}
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := lockers[i%len(lockers)].RLock(ctxT(t), n)
			if err != nil {
				t.Errorf("RLock: %v", err)
				return
			}
			defer lease.Release(context.Background())
			if k := inside.Add(1); k == readers {
				close(all)
			}
			select {
			case <-all:
				most.Store(readers)
			case <-time.After(eventually):
				t.Errorf("readers did not all hold at once: %d inside after %v", inside.Load(), eventually)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them find the writer
	suitekit.Release(t, w)
	wg.Wait()
	if most.Load() != readers {
		t.Fatalf("at most %d readers held together, want %d", most.Load(), readers)
	}
}

// writerExcludes: a writer keeps readers and writers out; a reader keeps
// writers out.
func (s *suite) writerExcludes(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	n := name(t)
	w := take(t, a, rwlock.Write, n)
	refused(t, b, rwlock.Read, n, "while a writer holds")
	refused(t, b, rwlock.Write, n, "while a writer holds")
	refused(t, a, rwlock.Read, n, "on the writer's own Locker")
	suitekit.Release(t, w)
	r := take(t, a, rwlock.Read, n, lock.WithWait(0))
	refused(t, b, rwlock.Write, n, "while a reader holds")
	suitekit.Release(t, r)
	suitekit.Release(t, take(t, b, rwlock.Write, n, lock.WithWait(0)))
}

// writerAlone runs readers and writers of several Lockers on one name and
// checks, on every enter and leave, a racy counter of who is inside: a
// writer finds nobody, a reader finds no writer. Writers also do a racy
// read-pause-write increment that a concurrent writer would lose.
func (s *suite) writerAlone(t *testing.T) {
	const lockers, perLocker, rounds = 3, 4, 10
	n := name(t)
	var (
		room room
		wg   sync.WaitGroup
	)
	for i := range lockers {
		l := s.locker(t)
		for j := range perLocker {
			wg.Go(func() {
				for r := range rounds {
					mode := rwlock.Read
					if (i+j+r)%3 == 0 {
						mode = rwlock.Write
					}
					if !room.visit(t, l, mode, n) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if k := room.bad.Load(); k > 0 {
		t.Errorf("%d times a writer was not alone", k)
	}
	if got, want := room.counter.Load(), room.writes.Load(); got != want {
		t.Errorf("writers' counter = %d after %d writes: writers overlapped", got, want)
	}
	if !room.overlapped.Load() {
		t.Logf("no two readers happened to hold at once") // ReadersOverlap checks that they can
	}
}

// A room is what writerAlone's holders share: who is inside, a counter
// only writers change, and what went wrong.
type room struct {
	readers, writers atomic.Int32
	counter          atomic.Int64
	bad              atomic.Int64 // a writer was not alone
	overlapped       atomic.Bool  // two readers were seen inside at once
	writes           atomic.Int64
}

// visit takes the lock of name in mode, enters, and releases it; false
// after a failure, which it reports.
func (rm *room) visit(t *testing.T, l *rwlock.Locker, mode rwlock.Mode, name string) bool {
	lease, err := acquire(ctxT(t), l, mode, name, lock.WithTTL(10*time.Second))
	if err != nil {
		t.Errorf("%v lock: %v", mode, err)
		return false
	}
	if mode == rwlock.Write {
		rm.write()
	} else {
		rm.read()
	}
	if err := lease.Release(ctxT(t)); err != nil {
		t.Errorf("Release: %v", err)
		return false
	}
	return true
}

// write is a writer inside: alone, it bumps the counter by a read and a
// late store, which another writer inside would make lose a write.
func (rm *room) write() {
	if w := rm.writers.Add(1); w != 1 || rm.readers.Load() != 0 {
		rm.bad.Add(1)
	}
	v := rm.counter.Load()
	time.Sleep(300 * time.Microsecond)
	rm.counter.Store(v + 1)
	rm.writes.Add(1)
	if rm.writers.Load() != 1 || rm.readers.Load() != 0 {
		rm.bad.Add(1)
	}
	rm.writers.Add(-1)
}

// read is a reader inside: no writer may be.
func (rm *room) read() {
	if rd := rm.readers.Add(1); rm.writers.Load() != 0 {
		rm.bad.Add(1)
	} else if rd > 1 {
		rm.overlapped.Store(true)
	}
	time.Sleep(time.Millisecond)
	if rm.writers.Load() != 0 {
		rm.bad.Add(1)
	}
	rm.readers.Add(-1)
}

// waitingWriterBlocks: while a reader holds and a writer waits, a new reader
// is refused; when the reader leaves, the writer gets in.
func (s *suite) waitingWriterBlocks(t *testing.T) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	n := name(t)
	r := take(t, a, rwlock.Read, n)
	got := lockLater(t, b, n)
	waitWaiting(t, b, n)
	refused(t, c, rwlock.Read, n, "while a writer waits")
	refused(t, a, rwlock.Read, n, "on the holding reader's Locker while a writer waits")
	suitekit.Release(t, r)
	w := got.wait(t)
	if w.Token() <= r.Token() {
		t.Errorf("writer's token %d <= the reader's before it %d", w.Token(), r.Token())
	}
	suitekit.Release(t, w)
	suitekit.Release(t, take(t, c, rwlock.Read, n, lock.WithWait(0)))
}

// writerNotStarved: readers arrive every millisecond, each holding 30 ms, so
// that some reader always holds (only a stall of this process over 30 ms
// lets them all leave); a writer still gets in.
func (s *suite) writerNotStarved(t *testing.T) {
	const readHold = 30 * time.Millisecond
	// Readers that wait for the writer pile up; a bound keeps them from
	// taking every connection the server has.
	const maxReadersInFlight = 40
	n := name(t)
	readersL := []*rwlock.Locker{s.locker(t), s.locker(t)}
	writer := s.locker(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, inFlight atomic.Int64
	// Keep the name read-held from the start.
	first := take(t, readersL[0], rwlock.Read, n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if inFlight.Load() >= maxReadersInFlight {
				continue // enough wait or hold already
			}
			inFlight.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer inFlight.Add(-1)
				ctx, cancel := context.WithCancel(ctxT(t))
				defer cancel()
				go func() {
					select {
					case <-stop:
						cancel()
					case <-ctx.Done():
					}
				}()
				lease, err := readersL[i%2].RLock(ctx, n)
				if err != nil {
					return // stopped while it waited
				}
				reads.Add(1)
				time.Sleep(readHold)
				_ = lease.Release(context.Background())
			}()
		}
	}()
	time.Sleep(20 * time.Millisecond)
	suitekit.Release(t, first)
	lease, err := writer.Lock(ctxT(t), n, lock.WithWait(starveWait))
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("writer starved by readers arriving every millisecond (%d reads): %v", reads.Load(), err)
	}
	t.Logf("writer got in after %d reads", reads.Load())
	suitekit.Release(t, lease)
}

// givenUpWriter: a writer that waited and gave up withdraws its intent, so
// a reader gets in at once, not after IntentTTL.
func (s *suite) givenUpWriter(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	for _, giveUp := range []string{"cancel", "wait limit"} {
		n := name(t)
		r := take(t, a, rwlock.Read, n)
		ctx, cancel := context.WithCancel(ctxT(t))
		opts := []lock.Option{}
		if giveUp == "wait limit" {
			opts = append(opts, lock.WithWait(300*time.Millisecond))
		}
		done := make(chan error, 1)
		go func() {
			_, err := b.Lock(ctx, n, opts...)
			done <- err
		}()
		waitWaiting(t, b, n)
		refused(t, a, rwlock.Read, n, "while a writer waits")
		if giveUp == "cancel" {
			cancel()
		}
		err := <-done
		cancel()
		switch {
		case giveUp == "cancel" && !errors.Is(err, context.Canceled):
			t.Fatalf("cancelled writer = %v, want context.Canceled", err)
		case giveUp == "wait limit" && !errors.Is(err, lock.ErrNotAcquired):
			t.Fatalf("writer out of time = %v, want ErrNotAcquired", err)
		}
		// Lock has returned: its intent is gone.
		suitekit.Release(t, take(t, a, rwlock.Read, n, lock.WithWait(0)))
		suitekit.Release(t, r)
	}
}

// ctxCancel: a reader waiting for a writer, and a writer waiting for a
// reader, return ctx's error when it is cancelled, and hold nothing.
func (s *suite) ctxCancel(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	for _, c := range []struct{ holder, waiter rwlock.Mode }{{rwlock.Write, rwlock.Read}, {rwlock.Read, rwlock.Write}} {
		n := name(t)
		held := take(t, a, c.holder, n)
		ctx, cancel := context.WithCancel(ctxT(t))
		time.AfterFunc(100*time.Millisecond, cancel)
		lease, err := acquire(ctx, b, c.waiter, n)
		if !errors.Is(err, context.Canceled) || lease != nil {
			t.Fatalf("%v waiting for a %v holder, cancelled = (%v, %v), want context.Canceled", c.waiter, c.holder, lease, err)
		}
		suitekit.Release(t, held)
		suitekit.Release(t, take(t, a, rwlock.Write, n, lock.WithWait(0)))
	}
}

func (s *suite) releaseTwice(t *testing.T) {
	l := s.locker(t)
	for _, mode := range []rwlock.Mode{rwlock.Read, rwlock.Write} {
		n := name(t)
		lease := take(t, l, mode, n)
		suitekit.Release(t, lease)
		if err := lease.Release(ctxT(t)); err != nil {
			t.Fatalf("%v: second Release = %v, want nil", mode, err)
		}
		if !errors.Is(lease.Err(), lock.ErrReleased) {
			t.Fatalf("%v: Err after Release = %v, want ErrReleased", mode, lease.Err())
		}
		// A second reader's release leaves the first's hold alone.
		if mode == rwlock.Read {
			r1, r2 := take(t, l, rwlock.Read, n), take(t, l, rwlock.Read, n)
			suitekit.Release(t, r2)
			_ = r2.Release(ctxT(t))
			refused(t, l, rwlock.Write, n, "while the first of two readers still holds")
			suitekit.Release(t, r1)
		}
		suitekit.Release(t, take(t, l, rwlock.Write, n, lock.WithWait(0)))
	}
}

// renewal: leases of both modes outlive several TTLs while held.
func (s *suite) renewal(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	nr, nw := name(t), name(t)
	r := take(t, a, rwlock.Read, nr, lock.WithTTL(s.ttl))
	w := take(t, a, rwlock.Write, nw, lock.WithTTL(s.ttl))
	time.Sleep(5 * s.ttl / 2)
	suitekit.NotDone(t, r)
	suitekit.NotDone(t, w)
	refused(t, b, rwlock.Write, nr, "on a renewed reader's name")
	refused(t, b, rwlock.Read, nw, "on a renewed writer's name")
	suitekit.Release(t, r)
	suitekit.Release(t, w)
}

// fixedReader: a reader with a fixed TTL, which stops holding when it runs
// out as a dead holder would, lets a waiting writer in after its TTL and
// never before.
func (s *suite) fixedReader(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	n := name(t)
	start := time.Now()
	r := take(t, a, rwlock.Read, n, lock.WithTTL(s.ttl), lock.WithFixedTTL())
	w, err := b.Lock(ctxT(t), n, lock.WithWait(eventually))
	if err != nil {
		t.Fatalf("writer after an expiring reader: %v", err)
	}
	// The server keeps the reader's hold at least until its local
	// deadline (the TTL less the drift margin, from before its attempt).
	got := time.Now()
	if got.Before(r.Deadline()) {
		t.Fatalf("writer got in %v before the expiring reader's deadline", r.Deadline().Sub(got))
	}
	if least := s.ttl - lock.DriftMargin(s.ttl); got.Sub(start) < least {
		t.Fatalf("writer got in %v after a reader took a %v lease, before %v", got.Sub(start), s.ttl, least)
	}
	suitekit.WaitDone(t, r, eventually) // the expired reader
	if !errors.Is(r.Err(), lock.ErrLeaseLost) {
		t.Fatalf("expired reader's Err = %v, want ErrLeaseLost", r.Err())
	}
	suitekit.Release(t, w)
}

// tokens: every acquisition's token is above every earlier one's for the
// name: a writer's above the readers' before it, a reader's above the last
// writer's.
func (s *suite) tokens(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	n := name(t)
	var last uint64
	check := func(what string, lease *lock.Lease) {
		t.Helper()
		if lease.Token() <= last {
			t.Fatalf("%s token %d <= the one before, %d", what, lease.Token(), last)
		}
		last = lease.Token()
	}
	w1 := take(t, a, rwlock.Write, n)
	check("first writer's", w1)
	suitekit.Release(t, w1)
	r1, r2 := take(t, a, rwlock.Read, n), take(t, b, rwlock.Read, n)
	check("reader's after a writer", r1)
	check("second reader's", r2)
	suitekit.Release(t, r1)
	suitekit.Release(t, r2)
	w2 := take(t, b, rwlock.Write, n)
	check("writer's after readers", w2)
	suitekit.Release(t, w2)
	check("reader's after the second writer", take(t, a, rwlock.Read, n, lock.WithFixedTTL(), lock.WithTTL(s.ttl)))
}

// doReaders: lock.Do runs work under a read lease through Readers, and
// under a write lease through Writers.
func (s *suite) doReaders(t *testing.T) {
	l := s.locker(t)
	n := name(t)
	err := lock.Do(ctxT(t), l.Readers(), n, func(ctx context.Context, r *lock.Lease) error {
		return lock.Do(ctx, l.Readers(), n, func(context.Context, *lock.Lease) error {
			refused(t, l, rwlock.Write, n, "inside two readers' Do")
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Do(ctxT(t), l.Writers(), n, func(context.Context, *lock.Lease) error {
		refused(t, l, rwlock.Read, n, "inside a writer's Do")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// inspect: an operator sees the writer, the readers with their labels and
// tokens, and a waiting writer.
func (s *suite) inspect(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	n := name(t)
	info, err := a.Inspect(ctxT(t), n)
	if errors.Is(err, lock.ErrUnsupported) {
		t.Skip("backend cannot inspect")
	}
	if err != nil {
		t.Fatal(err)
	}
	if info.Held() || info.Name != n {
		t.Fatalf("Inspect of a free name = %+v", info)
	}
	w := take(t, a, rwlock.Write, n, lock.WithHolder("repricer 7"))
	info, err = b.Inspect(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	if info.Writer == nil || info.Writer.Label != "repricer 7" || info.Writer.Token != w.Token() || len(info.Readers) != 0 {
		t.Fatalf("Inspect with a writer = %+v, writer %+v; want the writer labelled, token %d", info, info.Writer, w.Token())
	}
	if left := info.Writer.TimeLeft; left != lock.Unknown && (left <= 0 || left > lock.DefaultTTL) {
		t.Fatalf("writer's time left %v", info.Writer.TimeLeft)
	}
	suitekit.Release(t, w)
	r1 := take(t, a, rwlock.Read, n, lock.WithHolder("reader a"))
	r2 := take(t, b, rwlock.Read, n, lock.WithHolder("reader b"))
	got := lockLater(t, b, n)
	waitWaiting(t, b, n)
	info, err = a.Inspect(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]uint64{}
	for _, h := range info.Readers {
		labels[h.Label] = h.Token
	}
	if info.Writer != nil || len(info.Readers) != 2 || labels["reader a"] != r1.Token() || labels["reader b"] != r2.Token() || info.WritersWaiting != 1 {
		t.Fatalf("Inspect with two readers and a waiting writer = %+v", info)
	}
	if info.Token < r2.Token() {
		t.Fatalf("last token %d < the last reader's %d", info.Token, r2.Token())
	}
	suitekit.Release(t, r1)
	suitekit.Release(t, r2)
	suitekit.Release(t, got.wait(t))
}

func (s *suite) noGoroutineLeaks(t *testing.T) {
	before := suitekit.Goroutines()
	t.Run("work", func(t *testing.T) {
		a, b := s.locker(t), s.locker(t)
		n := name(t)
		r := take(t, a, rwlock.Read, n, lock.WithTTL(s.ttl))
		got := make(chan error, 1)
		go func() {
			lease, err := b.Lock(ctxT(t), n, lock.WithTTL(s.ttl))
			if err == nil {
				err = lease.Release(ctxT(t))
			}
			got <- err
		}()
		time.Sleep(s.ttl / 2) // at least one renewal
		suitekit.Release(t, r)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
	suitekit.WaitNoMore(t, before, eventually)
}

// operator: List finds a held name by its prefix, with its holders; Break
// ends one reader's hold, then the writer's, each holder learning it by
// Done, and every later token is higher than the broken ones.
func (s *suite) operator(t *testing.T) {
	a, b, op := s.locker(t), s.locker(t), s.locker(t)
	n := name(t)
	if s.h.NoOperator {
		if _, err := op.List(ctxT(t), n, 10, ""); !errors.Is(err, lock.ErrUnsupported) {
			t.Fatalf("List on a backend said to have no operator's view: %v, want lock.ErrUnsupported", err)
		}
		if _, _, err := op.Break(ctxT(t), n, 1, "ops", quiet); !errors.Is(err, lock.ErrUnsupported) {
			t.Fatalf("Break on a backend said to have no operator's view: %v, want lock.ErrUnsupported", err)
		}
		return
	}
	r1 := take(t, a, rwlock.Read, n, lock.WithHolder("reader a"), lock.WithTTL(s.ttl))
	r2 := take(t, b, rwlock.Read, n, lock.WithHolder("reader b"), lock.WithTTL(s.ttl))
	page, err := op.List(ctxT(t), n, lock.MaxListLimit, "")
	for err == nil && len(page.RWLocks) == 0 && page.Cursor != "" {
		page, err = op.List(ctxT(t), n, lock.MaxListLimit, page.Cursor)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(page.RWLocks) != 1 || page.RWLocks[0].Name != n || len(page.RWLocks[0].Readers) != 2 {
		t.Fatalf("List(%q) = %+v, want %q with its two readers", n, page.RWLocks, n)
	}
	if _, _, err := op.Break(ctxT(t), n, r1.Token(), "", nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Break without who asked: %v, want lock.ErrInvalid", err)
	}
	if _, _, err := op.Break(ctxT(t), n, r2.Token()+1000, "ops", quiet); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Break of a token nobody holds: %v, want lock.ErrNotHeld", err)
	}
	h, writer, err := op.Break(ctxT(t), n, r1.Token(), "ops", quiet)
	if err != nil || writer || h.Label != "reader a" || h.Token != r1.Token() {
		t.Fatalf("Break of reader a = %+v, writer %v, %v", h, writer, err)
	}
	suitekit.WaitDone(t, r1, eventually) // the broken reader
	suitekit.NotDone(t, r2)
	info, err := op.Inspect(ctxT(t), n)
	if err != nil || len(info.Readers) != 1 || info.Readers[0].Token != r2.Token() {
		t.Fatalf("after breaking reader a: %+v, %v; want reader b alone", info, err)
	}
	suitekit.Release(t, r2)
	w := take(t, a, rwlock.Write, n, lock.WithHolder("writer a"), lock.WithTTL(s.ttl))
	if _, writer, err := op.Break(ctxT(t), n, w.Token(), "ops", quiet); err != nil || !writer {
		t.Fatalf("Break of the writer: writer %v, %v", writer, err)
	}
	suitekit.WaitDone(t, w, eventually) // the broken writer
	next := take(t, b, rwlock.Write, n)
	if next.Token() <= w.Token() || next.Token() <= r1.Token() {
		t.Fatalf("the next writer's token %d is not above the broken holders' %d and %d", next.Token(), w.Token(), r1.Token())
	}
	suitekit.Release(t, next)
}

// quiet takes the breaks' log lines.
var quiet = slog.New(slog.DiscardHandler)
