// Package idemtest is the conformance suite every idem.Store and
// idem.TokenStore passes against its real server. A store is done when it
// passes Run (and RunTokens, if it keeps tokens) and, for stores shared
// between processes, Crash.
//
//	func TestConformance(t *testing.T) {
//		idemtest.Run(t, func(t *testing.T) idem.Store { return newStore(t) })
//	}
package idemtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/suitekit"
)

// Short deadlines keep the suite fast; they are far above a loopback round
// trip, and every timing check is one-sided (never before the deadline).
const (
	deadline = 300 * time.Millisecond
	long     = time.Minute
)

// UniqueKey returns a key no other test uses.
func UniqueKey(t testing.TB) string {
	return fmt.Sprintf("idemtest %s %s", t.Name(), idem.NewToken())
}

// Run checks the idem.Store contract and, for a store that implements
// idem.Inspector, that one too (the Inspect subtests; skipped otherwise).
// newStore is called once per subtest; it may return the same store each
// time (keys are unique per subtest).
func Run(t *testing.T, newStore func(t *testing.T) idem.Store) {
	t.Helper()
	on := func(fn func(*testing.T, idem.Store)) func(*testing.T) {
		return func(t *testing.T) { fn(t, newStore(t)) }
	}
	append(suitekit.Cases{
		{"ClaimFresh", on(testClaimFresh)},
		{"SecondClaimInProgress", on(testSecondClaimInProgress)},
		{"RecordThenReplay", on(testRecordThenReplay)},
		{"EmptyResult", on(testEmptyResult)},
		{"LargeBinaryResult", on(testLargeBinaryResult)},
		{"ReleaseLetsRetryRun", on(testReleaseLetsRetryRun)},
		{"WrongTokenRefused", on(testWrongTokenRefused)},
		{"FinishTwiceRefused", on(testFinishTwiceRefused)},
		{"TakeoverOnlyAfterDeadline", on(testTakeoverOnlyAfterDeadline)},
		{"RetentionEnds", on(testRetentionEnds)},
		{"ConcurrentClaimsOneWinner", on(testConcurrentClaims)},
		{"KeysDoNotCollide", on(testKeysDoNotCollide)},
		{"CanceledContext", on(testCanceledContext)},
		{"DoExactlyOnce", on(testDoExactlyOnce)},
		{"DoFailureReleases", on(testDoFailureReleases)},
		{"NaiveLostRequest", on(testNaiveLostRequest)},
		{"NaiveCheckThenSet", on(testNaiveCheckThenSet)},
		{"FingerprintMismatch", on(testFingerprintMismatch)},
	}, inspectCases(newStore)...).RunParallel(t)
}

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 20*time.Second) }

func mustClaim(t *testing.T, s idem.Store, key, fp string, d time.Duration, want idem.State) idem.Claim {
	t.Helper()
	c, err := s.Claim(ctxT(t), key, fp, d)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if c.State != want {
		t.Fatalf("Claim(%q) = %v, want %v", key, c.State, want)
	}
	return c
}

func testClaimFresh(t *testing.T, s idem.Store) {
	c := mustClaim(t, s, UniqueKey(t), "fp", long, idem.Claimed)
	if c.Token == "" {
		t.Fatal("Claimed without a token")
	}
}

func testSecondClaimInProgress(t *testing.T, s idem.Store) {
	key := UniqueKey(t)
	mustClaim(t, s, key, "fp-1", long, idem.Claimed)
	c := mustClaim(t, s, key, "fp-2", long, idem.InProgress)
	if c.Fingerprint != "fp-1" {
		t.Errorf("Fingerprint = %q, want the first claim's %q", c.Fingerprint, "fp-1")
	}
	if c.Token != "" {
		t.Errorf("InProgress carries token %q; only the owner may have one", c.Token)
	}
	if c.RetryAfter < 0 || c.RetryAfter > long {
		t.Errorf("RetryAfter = %v, want within (0, %v]", c.RetryAfter, long)
	}
}

func testRecordThenReplay(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Record(ctx, key, c.Token, []byte(`{"paid":100}`), long); err != nil {
		t.Fatalf("Record: %v", err)
	}
	for range 3 {
		r := mustClaim(t, s, key, "other", long, idem.Done)
		if string(r.Result) != `{"paid":100}` || r.Fingerprint != "fp" {
			t.Fatalf("replay = %q fp %q, want the recorded one", r.Result, r.Fingerprint)
		}
	}
}

func testEmptyResult(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "", long, idem.Claimed)
	if err := s.Record(ctx, key, c.Token, []byte{}, long); err != nil {
		t.Fatalf("Record: %v", err)
	}
	r := mustClaim(t, s, key, "", long, idem.Done)
	if r.Result == nil || len(r.Result) != 0 {
		t.Fatalf("Result = %#v, want empty and non-nil", r.Result)
	}
}

func testLargeBinaryResult(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Record(ctx, key, c.Token, big, long); err != nil {
		t.Fatalf("Record: %v", err)
	}
	r := mustClaim(t, s, key, "fp", long, idem.Done)
	if !bytes.Equal(r.Result, big) {
		t.Fatalf("1 MiB binary result came back different (%d bytes)", len(r.Result))
	}
}

func testReleaseLetsRetryRun(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Release(ctx, key, c.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	c2 := mustClaim(t, s, key, "fp", long, idem.Claimed)
	if c2.Token == c.Token {
		t.Fatal("a new claim reused the released token")
	}
	if err := s.Record(ctx, key, c.Token, []byte("stale"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("Record with the released token = %v, want ErrClaimLost", err)
	}
}

func testWrongTokenRefused(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Record(ctx, key, "not-the-token", []byte("x"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("Record(wrong token) = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, key, "not-the-token"); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("Release(wrong token) = %v, want ErrClaimLost", err)
	}
	mustClaim(t, s, key, "fp", long, idem.InProgress)
	other := UniqueKey(t)
	if err := s.Record(ctx, other, "nothing", []byte("x"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("Record(absent key) = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, other, "nothing"); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("Release(absent key) = %v, want ErrClaimLost", err)
	}
}

func testFinishTwiceRefused(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Record(ctx, key, c.Token, []byte("first"), long); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, key, c.Token, []byte("second"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("second Record = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, key, c.Token); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("Release after Record = %v, want ErrClaimLost", err)
	}
	if r := mustClaim(t, s, key, "fp", long, idem.Done); string(r.Result) != "first" {
		t.Errorf("outcome = %q, want %q", r.Result, "first")
	}
}

func testTakeoverOnlyAfterDeadline(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	start := time.Now()
	c := mustClaim(t, s, key, "fp", deadline, idem.Claimed)
	taken := claimWhenEnded(ctx, t, s, key, start, idem.InProgress, "the claim's deadline")
	if taken.Token == c.Token {
		t.Fatal("takeover got the dead owner's token")
	}
	if err := s.Record(ctx, key, c.Token, []byte("late"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("dead owner's late Record = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, key, c.Token); !errors.Is(err, idem.ErrClaimLost) {
		t.Errorf("dead owner's late Release = %v, want ErrClaimLost", err)
	}
	mustClaim(t, s, key, "fp", long, idem.InProgress)
	if err := s.Record(ctx, key, taken.Token, []byte("new"), long); err != nil {
		t.Fatalf("new owner's Record: %v", err)
	}
	if r := mustClaim(t, s, key, "fp", long, idem.Done); string(r.Result) != "new" {
		t.Errorf("outcome = %q, want the new owner's", r.Result)
	}
}

func testRetentionEnds(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	start := time.Now()
	if err := s.Record(ctx, key, c.Token, []byte("r"), deadline); err != nil {
		t.Fatal(err)
	}
	claimWhenEnded(ctx, t, s, key, start, idem.Done, "the outcome's retention")
}

// claimWhenEnded claims key again and again until a claim is made, once
// what, lasting deadline from start, has ended; until then every answer must
// be in state during. It returns the claim made.
func claimWhenEnded(ctx context.Context, t *testing.T, s idem.Store, key string, start time.Time, during idem.State, what string) idem.Claim {
	t.Helper()
	for {
		n, err := s.Claim(ctx, key, "fp", long)
		if err != nil {
			t.Fatal(err)
		}
		if n.State == idem.Claimed {
			if el := time.Since(start); el < deadline {
				t.Fatalf("claimed after %v, before the end of %s (%v)", el, what, deadline)
			}
			return n
		}
		if n.State != during {
			t.Fatalf("state %v before the end of %s, want %v", n.State, what, during)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testConcurrentClaims(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	const n = 50
	var claimed, inProgress atomic.Int32
	atOnce(n, func() {
		c, err := s.Claim(ctx, key, "fp", long)
		if err != nil {
			t.Error(err)
			return
		}
		switch c.State {
		case idem.Claimed:
			claimed.Add(1)
		case idem.InProgress:
			inProgress.Add(1)
		default:
			t.Errorf("state %v", c.State)
		}
	})
	if claimed.Load() != 1 || inProgress.Load() != n-1 {
		t.Fatalf("%d claimed, %d in progress; want 1 and %d", claimed.Load(), inProgress.Load(), n-1)
	}
}

// atOnce runs fn in n goroutines released at the same instant, and waits
// for them.
func atOnce(n int, fn func()) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			fn()
		})
	}
	close(gate)
	wg.Wait()
}

func testKeysDoNotCollide(t *testing.T, s idem.Store) {
	base := UniqueKey(t)
	keys := []string{
		base, base + "x", base + ":", base + "{}", base + "}{", base + "%", base + "_",
		base + " ", base + "ключ", base + "'; DROP TABLE x; --", idem.Key(base, "a:b", "c"), idem.Key(base, "a", "b:c"),
	}
	for _, k := range keys {
		mustClaim(t, s, k, "fp", long, idem.Claimed)
	}
	for _, k := range keys {
		mustClaim(t, s, k, "fp", long, idem.InProgress)
	}
}

func testCanceledContext(t *testing.T, s idem.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Claim(ctx, UniqueKey(t), "fp", long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a canceled context = %v, want context.Canceled", err)
	}
}

func testDoExactlyOnce(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	var runs atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	results := make(chan int, 50)
	for range 50 {
		wg.Go(func() {
			v, err := idem.Do(ctx, s, key, func(context.Context) (int, error) {
				<-release
				return int(runs.Add(1)) * 100, nil
			}, idem.WithWait(10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			results <- v
		})
	}
	time.Sleep(50 * time.Millisecond) // let the copies pile up behind the first
	close(release)
	wg.Wait()
	close(results)
	if runs.Load() != 1 {
		t.Fatalf("operation ran %d times, want 1", runs.Load())
	}
	for v := range results {
		if v != 100 {
			t.Fatalf("a copy got %d, want the first run's 100", v)
		}
	}
}

var errDeclined = errors.New("gateway timeout before charging")

func testDoFailureReleases(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	runs := 0
	fn := func(context.Context) (string, error) {
		runs++
		if runs == 1 {
			return "", errDeclined
		}
		return "charged", nil
	}
	if _, err := idem.Do(ctx, s, key, fn); !errors.Is(err, errDeclined) {
		t.Fatalf("first Do = %v, want its own error", err)
	}
	v, err := idem.Do(ctx, s, key, fn)
	if err != nil || v != "charged" || runs != 2 {
		t.Fatalf("retry = %q, %v after %d runs; want it to run and succeed", v, err, runs)
	}
	if v, err := idem.Do(ctx, s, key, fn); err != nil || v != "charged" || runs != 2 {
		t.Fatalf("third call = %q, %v after %d runs; want the replay", v, err, runs)
	}
}

// testNaiveLostRequest is the first naive guard people write: SET NX before
// the handler; the handler fails, and every retry is refused as a duplicate,
// so the payment is never made. With the claim cycle the failed run releases
// its claim and the retry is made.
func testNaiveLostRequest(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	charged := 0
	fail := true
	pay := func(context.Context) (int, error) {
		if fail {
			return 0, errors.New("bank connection reset")
		}
		charged++
		return charged, nil
	}
	_, _ = idem.Do(ctx, s, key, pay)
	fail = false
	if _, err := idem.Do(ctx, s, key, pay); err != nil {
		t.Fatalf("retry after a failure was refused: %v (the naive guard's lost request)", err)
	}
	if charged != 1 {
		t.Fatalf("charged %d times, want 1", charged)
	}
}

// testNaiveCheckThenSet is the second naive guard: GET the key, run if absent,
// then SET. Copies that GET before the first SET all run. The claim
// is one atomic step, so copies released at the same instant run it once.
func testNaiveCheckThenSet(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	var charged atomic.Int32
	atOnce(20, func() {
		_, err := idem.Do(ctx, s, key, func(context.Context) (int32, error) {
			time.Sleep(20 * time.Millisecond) // the window check-then-set leaves open
			return charged.Add(1), nil
		})
		if err != nil && !errors.Is(err, idem.ErrInProgress) {
			t.Error(err)
		}
	})
	if charged.Load() != 1 {
		t.Fatalf("charged %d times, want 1", charged.Load())
	}
}

func testFingerprintMismatch(t *testing.T, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 100, nil }
	if _, err := idem.Do(ctx, s, key, fn, idem.WithFingerprint("amount=100")); err != nil {
		t.Fatal(err)
	}
	if _, err := idem.Do(ctx, s, key, fn, idem.WithFingerprint("amount=999")); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("same key, other arguments = %v, want ErrFingerprintMismatch", err)
	}
	if runs != 1 {
		t.Fatalf("ran %d times, want 1", runs)
	}
}

// RunTokens checks the idem.TokenStore contract.
func RunTokens(t *testing.T, newStore func(t *testing.T) idem.TokenStore) {
	t.Helper()
	on := func(fn func(*testing.T, idem.TokenStore)) func(*testing.T) {
		return func(t *testing.T) { fn(t, newStore(t)) }
	}
	suitekit.Cases{
		{"ConsumeOnce", on(testTokenConsumeOnce)},
		{"UnknownRefused", on(testTokenUnknown)},
		{"WrongBindingRefusedAndSpent", on(testTokenWrongBinding)},
		{"Expires", on(testTokenExpires)},
		{"ConcurrentSubmitsOneWins", on(testTokenConcurrent)},
	}.RunParallel(t)
}

// issue issues a token bound to bind for d.
func issue(t *testing.T, ts idem.TokenStore, bind string, d time.Duration) string {
	t.Helper()
	tok, err := idem.IssueToken(ctxT(t), ts, bind, d)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func testTokenConsumeOnce(t *testing.T, ts idem.TokenStore) {
	ctx, tok := ctxT(t), issue(t, ts, "user-1/checkout", time.Minute)
	if err := idem.ConsumeToken(ctx, ts, tok, "user-1/checkout"); err != nil {
		t.Fatalf("first submit: %v", err)
	}
	if err := idem.ConsumeToken(ctx, ts, tok, "user-1/checkout"); !errors.Is(err, idem.ErrTokenInvalid) {
		t.Fatalf("second submit = %v, want ErrTokenInvalid", err)
	}
}

func testTokenUnknown(t *testing.T, ts idem.TokenStore) {
	ctx := ctxT(t)
	for _, tok := range []string{idem.NewToken(), "", "short", "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		if err := idem.ConsumeToken(ctx, ts, tok, ""); !errors.Is(err, idem.ErrTokenInvalid) {
			t.Errorf("ConsumeToken(%q) = %v, want ErrTokenInvalid", tok, err)
		}
	}
}

func testTokenWrongBinding(t *testing.T, ts idem.TokenStore) {
	ctx, tok := ctxT(t), issue(t, ts, "alice", time.Minute)
	if err := idem.ConsumeToken(ctx, ts, tok, "mallory"); !errors.Is(err, idem.ErrTokenInvalid) {
		t.Fatalf("other binding = %v, want ErrTokenInvalid", err)
	}
	if err := idem.ConsumeToken(ctx, ts, tok, "alice"); !errors.Is(err, idem.ErrTokenInvalid) {
		t.Fatalf("after a wrong-binding attempt = %v, want ErrTokenInvalid (spent)", err)
	}
}

func testTokenExpires(t *testing.T, ts idem.TokenStore) {
	ctx, tok := ctxT(t), issue(t, ts, "", deadline)
	time.Sleep(deadline + 50*time.Millisecond)
	if err := idem.ConsumeToken(ctx, ts, tok, ""); !errors.Is(err, idem.ErrTokenInvalid) {
		t.Fatalf("expired token = %v, want ErrTokenInvalid", err)
	}
}

func testTokenConcurrent(t *testing.T, ts idem.TokenStore) {
	ctx, tok := ctxT(t), issue(t, ts, "form", time.Minute)
	var ok atomic.Int32
	atOnce(50, func() {
		switch err := idem.ConsumeToken(ctx, ts, tok, "form"); {
		case err == nil:
			ok.Add(1)
		case !errors.Is(err, idem.ErrTokenInvalid):
			t.Error(err)
		}
	})
	if ok.Load() != 1 {
		t.Fatalf("%d of 50 submits accepted, want 1", ok.Load())
	}
}
