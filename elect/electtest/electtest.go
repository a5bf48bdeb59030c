// Package electtest is the conformance suite every lock backend passes for
// leader election (package elect) against a real server.
//
//	func TestElection(t *testing.T) {
//		electtest.Run(t, electtest.Harness{
//			New: func(t *testing.T) lock.Locker { ... },
//		})
//	}
package electtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// Harness describes a backend under test.
type Harness struct {
	// New returns a new Locker with its own connection(s) to the server,
	// standing for a separate process. If it implements io.Closer, the
	// suite closes it at the end of the test.
	New func(t *testing.T) lock.Locker

	// Break deletes name's lock behind its holder's back, as an operator, an
	// eviction or a failover would. Nil: lock.Break on a Locker from New.
	Break func(t *testing.T, name string)

	// TTL is the short term length used where a term must be renewed or
	// expire during a test. Default: 1 s.
	TTL time.Duration

	// TokenUnknown tells the suite that Leader's Token may be 0 (Redis
	// after the counter's retention); no backend under test sets it today.
	TokenUnknown bool

	// TokenApprox tells the suite that Leader's Token is the backend's view
	// of a quorum, which may differ from the term's own while the lock
	// changes hands (Redlock: the quorum-th smallest counter of the servers
	// that hold it). Observers are then checked by value alone.
	TokenApprox bool

	// Queued tells the suite that candidates queue in arrival order: on
	// the server (etcd, ZooKeeper), or in the one Locker all candidates
	// share (memory). The suite then checks that they are elected in that
	// order.
	Queued bool
}

// eventually bounds waits for things that must happen: a failure timeout,
// not a performance target.
const eventually = 20 * time.Second

// Run runs the whole suite; its subtests run in parallel with unique names.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("electtest: Harness.New is required")
	}
	s := &suite{h: h, ttl: cmp.Or(h.TTL, time.Second)}
	var arrivalOrder func(*testing.T) // nil: the backend does not queue candidates
	if h.Queued {
		arrivalOrder = s.arrivalOrder
	}
	suitekit.Cases{
		{"BadInputTouchesNoServer", s.badInput},
		{"NoLeader", s.noLeader},
		{"OneLeaderAtATime", s.oneLeader},
		{"ResignHandsOver", s.resignHandsOver},
		{"ProclaimKeepsTerm", s.proclaim},
		{"ObserveInOrder", s.observe},
		{"IdleObserverCost", s.idleObserver},
		{"LostTermIsFenced", s.lostTerm},
		{"RunAgainAfterLoss", s.runAgain},
		{"RunReturnsWork", s.runReturns},
		{"ArrivalOrder", arrivalOrder},
	}.RunParallel(t)
}

type suite struct {
	h   Harness
	ttl time.Duration
}

func (s *suite) locker(t *testing.T) lock.Locker {
	t.Helper()
	return suitekit.Made(t, s.h.New(t))
}

// name returns an election name unique to this test and run.
func name(t *testing.T) string {
	return suitekit.Name(t, "electtest", "-")
}

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 90*time.Second) }

// receive returns the next value from ch, failing t with what if none comes
// within eventually.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventually):
		t.Fatal(what)
		panic("unreachable") // t.Fatal does not return
	}
}

func (s *suite) election(t *testing.T, l lock.Locker, name string, opts ...elect.Option) *elect.Election {
	t.Helper()
	e, err := elect.New(l, name, append([]elect.Option{elect.WithTTL(s.ttl), elect.WithPollInterval(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("elect.New: %v", err)
	}
	return e
}

func campaign(t *testing.T, e *elect.Election, value string) *elect.Term {
	t.Helper()
	term, err := e.Campaign(ctxT(t), value)
	if err != nil {
		t.Fatalf("Campaign(%q): %v", value, err)
	}
	if term.Err() != nil || term.Value() != value || term.Token() == 0 {
		t.Fatalf("fresh term: Err %v, Value %q, Token %d", term.Err(), term.Value(), term.Token())
	}
	return term
}

func resign(t *testing.T, term *elect.Term) {
	t.Helper()
	if err := term.Resign(ctxT(t)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

func (s *suite) breakLock(t *testing.T, name string) {
	t.Helper()
	if s.h.Break != nil {
		s.h.Break(t, name)
		return
	}
	if _, err := lock.Break(ctxT(t), s.locker(t), name, "electtest", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("lock.Break(%q): %v", name, err)
	}
}

// countingLocker counts the calls that would reach the server.
type countingLocker struct {
	lock.Locker
	calls atomic.Int64
}

func (c *countingLocker) Acquire(ctx context.Context, key string, opts ...lock.Option) (*lock.Lease, error) {
	c.calls.Add(1)
	return c.Locker.Acquire(ctx, key, opts...)
}

func (s *suite) badInput(t *testing.T) {
	ctx := ctxT(t)
	cl := &countingLocker{Locker: s.locker(t)}
	var nilLocker *countingLocker
	for what, err := range map[string]error{
		"nil Locker":       second(elect.New(nil, "x")),
		"nil *Locker":      second(elect.New(nilLocker, "x")),
		"empty name":       second(elect.New(cl, "")),
		"huge name":        second(elect.New(cl, strings.Repeat("n", lock.MaxKeyLen+1))),
		"TTL out of range": second(elect.New(cl, "x", elect.WithTTL(time.Nanosecond))),
		"poll too short":   second(elect.New(cl, "x", elect.WithPollInterval(time.Microsecond))),
	} {
		if !errors.Is(err, elect.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	e := s.election(t, cl, name(t))
	for what, value := range map[string]string{
		"huge value":        strings.Repeat("v", elect.MaxValueLen+1),
		"control character": "host\nforged",
		"invalid UTF-8":     "\xff",
		"empty value":       "", // would read as nobody leading
	} {
		if _, err := e.Campaign(ctx, value); !errors.Is(err, elect.ErrInvalid) {
			t.Errorf("Campaign with %s: %v, want ErrInvalid", what, err)
		}
		if err := e.Run(ctx, value, func(context.Context, *elect.Term) error { return nil }); !errors.Is(err, elect.ErrInvalid) {
			t.Errorf("Run with %s: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := e.Campaign(ctx, "v", elect.WithWait(-time.Second)); !errors.Is(err, elect.ErrInvalid) {
		t.Errorf("negative wait: %v, want ErrInvalid", err)
	}
	if err := e.Run(ctx, "v", nil); !errors.Is(err, elect.ErrInvalid) {
		t.Errorf("Run(nil fn): %v, want ErrInvalid", err)
	}
	if n := cl.calls.Load(); n != 0 {
		t.Fatalf("bad input reached the backend %d times", n)
	}
	term := campaign(t, e, "good")
	defer resign(t, term)
	for _, value := range []string{strings.Repeat("v", elect.MaxValueLen+1), "a\x00b", ""} {
		if err := term.Proclaim(ctx, value); !errors.Is(err, elect.ErrInvalid) {
			t.Errorf("Proclaim(%q): %v, want ErrInvalid", value, err)
		}
	}
	if got, err := s.election(t, cl.Locker, e.Name()).Leader(ctx); err != nil || got.Value != "good" {
		t.Fatalf("after refused proclaims Leader = %+v, %v; want value good", got, err)
	}
}

func second[T any](_ T, err error) error { return err }

func (s *suite) noLeader(t *testing.T) {
	e := s.election(t, s.locker(t), name(t))
	if l, err := e.Leader(ctxT(t)); !errors.Is(err, elect.ErrNoLeader) {
		t.Fatalf("Leader of a new election = %+v, %v; want ErrNoLeader", l, err)
	}
	if _, err := e.Campaign(ctxT(t), "a", elect.WithWait(0)); err != nil {
		t.Fatalf("try-once campaign of a free election: %v", err)
	}
	other := s.election(t, s.locker(t), e.Name())
	if _, err := other.Campaign(ctxT(t), "b", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once campaign of a led election: %v, want ErrNotAcquired", err)
	}
}

// fenced is a resource that accepts a write only with a token at least the
// highest it has seen, and logs the writes it accepted.
type fenced struct {
	mu      sync.Mutex
	highest uint64
	log     []string
}

func (f *fenced) write(token uint64, what string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.highest {
		return false
	}
	f.highest = token
	f.log = append(f.log, fmt.Sprintf("%d %s", token, what))
	return true
}

func (s *suite) oneLeader(t *testing.T) {
	const candidates, terms = 5, 4
	n := name(t)
	var (
		office offices
		wg     sync.WaitGroup
	)
	for i := range candidates {
		e := s.election(t, s.locker(t), n)
		wg.Go(func() { office.serve(t, e, i, terms) })
	}
	wg.Wait()
	tokens := office.tokens
	if len(tokens) != candidates*terms {
		t.Fatalf("%d terms, want %d", len(tokens), candidates*terms)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term %d's token %d is not above the earlier term's %d", i, tokens[i], tokens[i-1])
		}
	}
}

// offices records the terms of candidates that take turns to lead: how
// many lead at once, what they write to a fenced resource, and the tokens
// of the terms in the order they began.
type offices struct {
	inOffice atomic.Int32
	res      fenced
	mu       sync.Mutex
	tokens   []uint64 // guarded by mu
}

// serve has candidate i win terms terms one after another, writing three
// times to the resource in each and resigning it.
func (o *offices) serve(t *testing.T, e *elect.Election, i, terms int) {
	for j := range terms {
		term, err := e.Campaign(ctxT(t), fmt.Sprintf("candidate-%d", i))
		if err != nil {
			t.Errorf("candidate %d: Campaign: %v", i, err)
			return
		}
		if k := o.inOffice.Add(1); k != 1 {
			t.Errorf("%d leaders at once", k)
		}
		o.mu.Lock()
		o.tokens = append(o.tokens, term.Token())
		o.mu.Unlock()
		for w := range 3 {
			if !o.res.write(term.Token(), fmt.Sprintf("candidate-%d term %d write %d", i, j, w)) {
				t.Errorf("candidate %d: a leader's write was refused: another leader wrote with a higher token", i)
			}
			time.Sleep(time.Millisecond)
		}
		o.inOffice.Add(-1)
		if err := term.Resign(ctxT(t)); err != nil {
			t.Errorf("candidate %d: Resign: %v", i, err)
		}
	}
}

func (s *suite) resignHandsOver(t *testing.T) {
	// A long TTL: the hand-over must not wait for it.
	const ttl = 30 * time.Second
	n := name(t)
	a := s.election(t, s.locker(t), n, elect.WithTTL(ttl))
	b := s.election(t, s.locker(t), n, elect.WithTTL(ttl))
	ta := campaign(t, a, "a")
	bctx, cancel := context.WithCancel(ctxT(t))
	got := campaignAsync(bctx, b, "b")
	defer func() { cancel(); stopAsync(t, got) }()
	// Give b time to queue (its attempt finds a leading), then resign.
	waitFor(t, "b to wait", func() bool {
		info, err := lock.Inspect(ctxT(t), s.locker(t), n)
		return err == nil && info.Held && (info.Waiting || info.Waiters > 0 || info.Waiters == lock.Unknown)
	})
	resigned := time.Now()
	resign(t, ta)
	select {
	case r := <-got:
		got <- r
		if r.err != nil {
			t.Fatalf("b: Campaign: %v", r.err)
		}
		tb := r.term
		if tb.Token() <= ta.Token() {
			t.Fatalf("b's token %d is not above a's %d", tb.Token(), ta.Token())
		}
		if d := time.Since(resigned); d >= ttl-lock.DriftMargin(ttl) {
			t.Fatalf("b elected %v after a resigned: it waited for the TTL", d)
		}
	case <-time.After(ttl):
		t.Fatal("b not elected within the TTL after a resigned")
	}
}

// campaignResult is what campaignAsync's Campaign returned.
type campaignResult struct {
	term *elect.Term
	err  error
}

// campaignAsync campaigns in a goroutine that touches no testing.T; its
// result arrives on the channel.
func campaignAsync(ctx context.Context, e *elect.Election, value string) chan campaignResult {
	got := make(chan campaignResult, 1)
	go func() {
		term, err := e.Campaign(ctx, value)
		got <- campaignResult{term, err}
	}()
	return got
}

// stopAsync waits for campaignAsync's result (its ctx must be done or
// ending) and resigns the term it won, if any.
func stopAsync(t *testing.T, got chan campaignResult) {
	t.Helper()
	r := <-got
	if r.term != nil {
		_ = r.term.Resign(context.Background())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *suite) proclaim(t *testing.T) {
	ctx := ctxT(t)
	e := s.election(t, s.locker(t), name(t))
	term := campaign(t, e, "first")
	defer resign(t, term)
	if err := term.Proclaim(ctx, "second"); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	if term.Value() != "second" {
		t.Fatalf("Value after Proclaim = %q", term.Value())
	}
	other := s.election(t, s.locker(t), e.Name())
	l, err := other.Leader(ctx)
	if err != nil || l.Value != "second" || !l.Elected {
		t.Fatalf("Leader after Proclaim = %+v, %v; want value second", l, err)
	}
	if !s.h.TokenUnknown && l.Token != term.Token() {
		t.Fatalf("Leader's token %d, the term's %d: Proclaim must keep the term", l.Token, term.Token())
	}
	// The term outlives several TTLs after the proclaim: renewals go on
	// with the new value.
	select {
	case <-term.Done():
		t.Fatalf("term ended after Proclaim: %v", term.Err())
	case <-time.After(3 * s.ttl):
	}
	if err := term.Proclaim(ctx, "third"); err != nil {
		t.Fatalf("second Proclaim: %v", err)
	}
	if l, err := other.Leader(ctx); err != nil || l.Value != "third" {
		t.Fatalf("Leader after the second Proclaim = %+v, %v", l, err)
	}
	if _, err := other.Campaign(ctx, "usurper", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("campaign against a proclaimed leader: %v, want ErrNotAcquired", err)
	}
	resign(t, term)
	if err := term.Proclaim(ctx, "late"); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Proclaim after Resign: %v, want ErrReleased", err)
	}
}

func (s *suite) observe(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	n := name(t)
	ch, err := s.election(t, s.locker(t), n).Observe(ctx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	o := &observer{t: t, ch: ch}
	first := o.next(func(l elect.Leader) bool { return true }, "the current leader")
	if first.Elected {
		t.Fatalf("first observation of a new election: %+v, want no leader", first)
	}
	a := s.election(t, s.locker(t), n)
	b := s.election(t, s.locker(t), n)
	ta := campaign(t, a, "a")
	la := o.next(func(l elect.Leader) bool { return l.Elected }, "a elected")
	if la.Value != "a" || la.Token != ta.Token() || la.Since.IsZero() {
		t.Fatalf("observed %+v, want a with token %d and a time", la, ta.Token())
	}
	if err := ta.Proclaim(ctx, "a2"); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	la2 := o.next(func(l elect.Leader) bool { return l.Value != "a" }, "a's new value")
	if la2.Value != "a2" || la2.Token != ta.Token() {
		t.Fatalf("observed %+v after Proclaim, want a2 with token %d", la2, ta.Token())
	}
	got := campaignAsync(ctx, b, "b")
	defer func() { cancel(); stopAsync(t, got) }()
	resign(t, ta)
	lb := o.next(func(l elect.Leader) bool { return l.Elected && l.Value != "a2" }, "b elected")
	r := <-got
	got <- r
	if r.err != nil {
		t.Fatalf("b: Campaign: %v", r.err)
	}
	tb := r.term
	if lb.Value != "b" || (!s.h.TokenApprox && lb.Token != tb.Token()) || lb.Token <= ta.Token() {
		t.Fatalf("observed %+v, want b with token %d above %d", lb, tb.Token(), ta.Token())
	}
	for _, l := range o.seen {
		if l.Elected && !(l.Value == "a2" && (s.h.TokenApprox || l.Token == ta.Token())) {
			t.Fatalf("phantom leader observed: %+v", l)
		}
	}
	o.seen = nil
	resign(t, tb)
	o.next(func(l elect.Leader) bool { return !l.Elected }, "no leader after b resigned")
	for _, l := range o.seen {
		t.Fatalf("observed %+v between b's resign and the vacancy", l)
	}
	cancel()
	for range ch {
	}
}

// observer reads an Observe channel up to the observations a test waits
// for, keeping those it passed on the way.
type observer struct {
	t    *testing.T
	ch   <-chan elect.Leader
	seen []elect.Leader // what next skipped on its way
}

// next returns the first observation that want accepts, failing the test
// if the channel closes or none arrives in time.
func (o *observer) next(want func(elect.Leader) bool, what string) elect.Leader {
	o.t.Helper()
	timeout := time.After(eventually)
	for {
		select {
		case l, ok := <-o.ch:
			if !ok {
				o.t.Fatalf("observe channel closed waiting for %s", what)
			}
			if want(l) {
				return l
			}
			o.t.Logf("observed %+v on the way to %s", l, what)
			o.seen = append(o.seen, l)
		case <-timeout:
			o.t.Fatalf("not observed: %s", what)
		}
	}
}

func (s *suite) lostTerm(t *testing.T) {
	n := name(t)
	var res fenced
	a := s.election(t, s.locker(t), n)
	ta := campaign(t, a, "a")
	if !res.write(ta.Token(), "a before") {
		t.Fatal("a's first write refused")
	}
	s.breakLock(t, n)
	receive(t, ta.Done(), "a's Done not closed after its lock was broken")
	if err := ta.Err(); !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("a's Err = %v, want ErrLeaseLost", err)
	}
	b := s.election(t, s.locker(t), n)
	tb := campaign(t, b, "b")
	defer resign(t, tb)
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d is not above the deposed a's %d", tb.Token(), ta.Token())
	}
	if !res.write(tb.Token(), "b") {
		t.Fatal("b's write refused")
	}
	if res.write(ta.Token(), "a after") {
		t.Fatal("the deposed leader's late write was accepted")
	}
	if err := ta.Resign(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Resign of a lost term: %v, want ErrNotHeld", err)
	}
	if l, err := b.Leader(ctxT(t)); err != nil || l.Value != "b" {
		t.Fatalf("Leader = %+v, %v after a's resign of a lost term; want b", l, err)
	}
}

func (s *suite) runAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	n := name(t)
	e := s.election(t, s.locker(t), n)
	started := make(chan uint64, 4)
	ended := make(chan error, 4)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, "runner", func(ctx context.Context, term *elect.Term) error {
			started <- term.Token()
			<-ctx.Done()
			return context.Cause(ctx)
		}, elect.Again(), elect.WithBackoff(10*time.Millisecond, 100*time.Millisecond),
			elect.OnTermEnd(func(_ *elect.Term, err error) { ended <- err }))
	}()
	first := receive(t, started, "Run's function did not start")
	s.breakLock(t, n)
	if err := receive(t, ended, "the broken term's function was not stopped"); !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("the broken term's outcome: %v, want ErrLeaseLost", err)
	}
	if second := receive(t, started, "Run did not campaign again"); second <= first {
		t.Fatalf("second term's token %d is not above the first's %d", second, first)
	}
	cancel()
	if err := receive(t, done, "Run did not return after ctx was cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if _, err := e.Leader(ctxT(t)); !errors.Is(err, elect.ErrNoLeader) {
		t.Fatalf("after Run returned, Leader: %v, want ErrNoLeader (it resigned)", err)
	}
}

func (s *suite) runReturns(t *testing.T) {
	e := s.election(t, s.locker(t), name(t))
	boom := errors.New("boom")
	var token uint64
	err := e.Run(ctxT(t), "once", func(ctx context.Context, term *elect.Term) error {
		token = term.Token()
		if l, err := e.Leader(ctx); err != nil || l.Value != "once" {
			t.Errorf("Leader while Run's function runs = %+v, %v", l, err)
		}
		return boom
	})
	if !errors.Is(err, boom) || token == 0 {
		t.Fatalf("Run = %v (token %d), want fn's error", err, token)
	}
	if _, err := e.Leader(ctxT(t)); !errors.Is(err, elect.ErrNoLeader) {
		t.Fatalf("after Run, Leader: %v, want ErrNoLeader", err)
	}
}

// arrivalOrder: on a backend that queues, candidates that campaign one
// after another (each queued before the next arrives) are elected in that
// order, one resign after another.
func (s *suite) arrivalOrder(t *testing.T) {
	n := name(t)
	leader := campaign(t, s.election(t, s.locker(t), n), "first")
	ctx, cancel := context.WithCancel(ctxT(t))
	const waiting = 3
	var got []chan campaignResult
	defer func() {
		cancel()
		for _, g := range got {
			stopAsync(t, g)
		}
	}()
	for i := range waiting {
		got = append(got, campaignAsync(ctx, s.election(t, s.locker(t), n), fmt.Sprint("candidate-", i)))
		waitFor(t, "the candidate to queue", func() bool {
			info, err := lock.Inspect(ctxT(t), s.locker(t), n)
			return err == nil && info.Waiters == i+1
		})
	}
	prev := leader
	for i, g := range got {
		resign(t, prev)
		r := <-g
		g <- r
		if r.err != nil {
			t.Fatalf("candidate %d: %v", i, r.err)
		}
		if r.term.Value() != fmt.Sprint("candidate-", i) {
			t.Fatalf("elected %q, want candidate-%d: not in arrival order", r.term.Value(), i)
		}
		if r.term.Token() <= prev.Token() {
			t.Fatalf("token %d is not above the previous term's %d", r.term.Token(), prev.Token())
		}
		prev = r.term
	}
}

// countingInspector is a Locker that counts the reads of who holds a lock,
// and passes the holder watch through.
type countingInspector struct {
	lock.Locker
	reads    atomic.Int64
	complete atomic.Bool // what the backend's watch said
}

func (c *countingInspector) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	c.reads.Add(1)
	return c.Locker.(lock.Inspector).InspectLock(ctx, key)
}

func (c *countingInspector) WatchHolder(ctx context.Context, key string) (<-chan struct{}, func(), bool, error) {
	w, ok := c.Locker.(interface {
		WatchHolder(ctx context.Context, key string) (<-chan struct{}, func(), bool, error)
	})
	if !ok {
		return nil, nil, false, lock.ErrUnsupported
	}
	ch, stop, complete, err := w.WatchHolder(ctx, key)
	c.complete.Store(complete && err == nil)
	return ch, stop, complete, err
}

// idleObserver: an observer of an election nobody changes reads the leader
// only to confirm it, once per third of the TTL, where the backend's watch
// tells every change, and otherwise at most once per poll interval.
func (s *suite) idleObserver(t *testing.T) {
	n := name(t)
	term := campaign(t, s.election(t, s.locker(t), n), "steady")
	defer resign(t, term)
	const poll, idle = 100 * time.Millisecond, time.Second
	ci := &countingInspector{Locker: s.locker(t)}
	e, err := elect.New(ci, n, elect.WithTTL(s.ttl), elect.WithPollInterval(poll))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := e.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := <-ch; l.Value != "steady" {
		t.Fatalf("observed %+v", l)
	}
	start := time.Now()
	time.Sleep(idle)
	reads, took := ci.reads.Load(), time.Since(start)
	cancel()
	for range ch {
	}
	if ci.complete.Load() {
		if max := int64(took/(s.ttl/3)) + 2; reads > max {
			t.Fatalf("an idle observer read the leader %d times in %v, though the watch tells every change: want at most one per third of the %v TTL", reads, took, s.ttl)
		}
		return
	}
	if max := int64(took/poll) + 2; reads > max {
		t.Fatalf("an idle observer read the leader %d times in %v, more than once per %v", reads, took, poll)
	}
	if reads < 2 {
		t.Fatalf("an observer whose watch misses changes read the leader %d times in %v: it does not poll", reads, took)
	}
}
