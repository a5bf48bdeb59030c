// Package deduptest is the conformance suite of the dedup contracts, run by
// every backend against its real server. A Store is done when it passes Run
// (and, when it implements dedup.BatchClaimer, the batch checks Run adds); a
// handler wrapper that is not built on a Store, such as the transactional
// inbox, is done when it passes RunHandler.
//
//	func TestConformance(t *testing.T) {
//		deduptest.Run(t, func(t *testing.T) dedup.Store { return newStore(t) })
//	}
package deduptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/suitekit"
)

// Short TTLs keep the suite fast; they are far above a loopback round trip,
// and every timing check is one-sided (never "before the TTL").
const (
	ttl  = 300 * time.Millisecond
	long = time.Minute
)

// UniqueID returns a message id no other test uses.
func UniqueID(t testing.TB) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("deduptest %s %s", t.Name(), hex.EncodeToString(b[:]))
}

// Run checks the dedup.Store contract (and dedup.Inspector's, the Inspect
// subtests, for a store that implements it; skipped otherwise), then runs
// RunHandler on a dedup.Deduper over the store. newStore is called once per subtest and may
// return the same store each time (ids are unique per subtest).
func Run(t *testing.T, newStore func(t *testing.T) dedup.Store) {
	t.Helper()
	on := func(fn func(*testing.T, dedup.Store)) func(*testing.T) {
		return func(t *testing.T) { fn(t, newStore(t)) }
	}
	append(suitekit.Cases{
		{"ClaimFresh", on(testClaimFresh)},
		{"SecondClaimInProgress", on(testSecondClaimInProgress)},
		{"DoneThenDuplicate", on(testDoneThenDuplicate)},
		{"ReleaseLetsRedeliveryRun", on(testRelease)},
		{"WrongTokenRefused", on(testWrongToken)},
		{"ExpiryOnlyAfterTTL", on(testExpiry)},
		{"RetentionEnds", on(testRetentionEnds)},
		{"ConcurrentClaimsOneWinner", on(testConcurrentClaims)},
		{"IDsDoNotCollide", on(testIDsDoNotCollide)},
		{"CanceledContext", on(testCanceled)},
		{"Batch", on(testBatch)},
		{"Handler", func(t *testing.T) {
			RunHandler(t, func(t *testing.T, next dedup.Handler) dedup.Handler {
				d, err := dedup.New(newStore(t), dedup.WithProcessingTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				return d.Wrap(next)
			})
		}},
	}, inspectCases(newStore)...).RunParallel(t)
}

func ctxT(t *testing.T) context.Context { return suitekit.Context(t, 20*time.Second) }

func mustClaim(t *testing.T, s dedup.Store, id string, d time.Duration, want dedup.State) dedup.Claim {
	t.Helper()
	c, err := s.Claim(ctxT(t), id, d)
	if err != nil {
		t.Fatalf("Claim(%q): %v", id, err)
	}
	if c.State != want {
		t.Fatalf("Claim(%q) = %v, want %v", id, c.State, want)
	}
	return c
}

func testClaimFresh(t *testing.T, s dedup.Store) {
	if c := mustClaim(t, s, UniqueID(t), long, dedup.Claimed); c.Token == "" {
		t.Fatal("Claimed without a token")
	}
}

func testSecondClaimInProgress(t *testing.T, s dedup.Store) {
	id := UniqueID(t)
	mustClaim(t, s, id, long, dedup.Claimed)
	c := mustClaim(t, s, id, long, dedup.InProgress)
	if c.Token != "" {
		t.Errorf("InProgress carries token %q; only the owner may have one", c.Token)
	}
	if c.RetryAfter < 0 || c.RetryAfter > long {
		t.Errorf("RetryAfter = %v, want within [0, %v]", c.RetryAfter, long)
	}
}

func testDoneThenDuplicate(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	c := mustClaim(t, s, id, long, dedup.Claimed)
	if err := s.Done(ctx, id, c.Token, long); err != nil {
		t.Fatalf("Done: %v", err)
	}
	for range 3 {
		mustClaim(t, s, id, long, dedup.Done)
	}
	if err := s.Done(ctx, id, c.Token, long); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("second Done = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, id, c.Token); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("Release after Done = %v, want ErrClaimLost", err)
	}
	mustClaim(t, s, id, long, dedup.Done)
}

func testRelease(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	c1 := mustClaim(t, s, id, long, dedup.Claimed)
	if err := s.Release(ctx, id, c1.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	c2 := mustClaim(t, s, id, long, dedup.Claimed)
	if c2.Token == c1.Token {
		t.Fatal("a new claim reused the released claim's token")
	}
	if err := s.Release(ctx, id, c1.Token); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("stale Release = %v, want ErrClaimLost", err)
	}
	mustClaim(t, s, id, long, dedup.InProgress)
}

func testWrongToken(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	c := mustClaim(t, s, id, long, dedup.Claimed)
	wrong := strings.Repeat("0", len(c.Token))
	if wrong == c.Token {
		wrong = strings.Repeat("1", len(c.Token))
	}
	if err := s.Done(ctx, id, wrong, long); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("Done with a wrong token = %v, want ErrClaimLost", err)
	}
	if err := s.Release(ctx, id, wrong); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("Release with a wrong token = %v, want ErrClaimLost", err)
	}
	mustClaim(t, s, id, long, dedup.InProgress)
	if err := s.Done(ctx, id, c.Token, long); err != nil {
		t.Fatalf("Done by the owner after refused strangers: %v", err)
	}
	mustClaim(t, s, id, long, dedup.Done)
}

// testExpiry is a consumer that crashed after claiming: its claim must block
// copies until the TTL and let one through after it, and its late Done must
// then be refused.
func testExpiry(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	before := time.Now()
	c1 := mustClaim(t, s, id, ttl, dedup.Claimed)
	c, err := s.Claim(ctx, id, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(before) < ttl && c.State != dedup.InProgress {
		t.Fatalf("Claim before the TTL ended = %v, want in progress", c.State)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	c2 := mustClaim(t, s, id, long, dedup.Claimed)
	if c2.Token == c1.Token {
		t.Fatal("takeover reused the expired claim's token")
	}
	if err := s.Done(ctx, id, c1.Token, long); !errors.Is(err, dedup.ErrClaimLost) {
		t.Fatalf("late Done of the crashed consumer = %v, want ErrClaimLost", err)
	}
	if err := s.Done(ctx, id, c2.Token, long); err != nil {
		t.Fatalf("Done of the new owner: %v", err)
	}
	mustClaim(t, s, id, long, dedup.Done)
}

func testRetentionEnds(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	c := mustClaim(t, s, id, long, dedup.Claimed)
	before := time.Now()
	if err := s.Done(ctx, id, c.Token, ttl); err != nil {
		t.Fatal(err)
	}
	d, err := s.Claim(ctx, id, long)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(before) < ttl && d.State != dedup.Done {
		t.Fatalf("Claim within retention = %v, want done", d.State)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	mustClaim(t, s, id, long, dedup.Claimed)
}

func testConcurrentClaims(t *testing.T, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	const n = 32
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
		errs    []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			c, err := s.Claim(ctx, id, long)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if c.State == dedup.Claimed {
				claimed++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("claims failed: %v", errors.Join(errs...))
	}
	if claimed != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", claimed, n)
	}
}

// testIDsDoNotCollide uses ids that a store splicing them into keys,
// patterns or statements would confuse.
func testIDsDoNotCollide(t *testing.T, s dedup.Store) {
	ctx := ctxT(t)
	base := UniqueID(t)
	ids := []string{base, base + "}", "{" + base + "}", base + " ", base + "*", base + "'; --", base + "é", base + strings.Repeat("x", dedup.MaxIDLen-len(base)-1)}
	claims := make([]dedup.Claim, len(ids))
	for i, id := range ids {
		claims[i] = mustClaim(t, s, id, long, dedup.Claimed)
	}
	if err := s.Done(ctx, ids[0], claims[0].Token, long); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, ids[0], long, dedup.Done)
	for _, id := range ids[1:] {
		mustClaim(t, s, id, long, dedup.InProgress)
	}
}

func testCanceled(t *testing.T, s dedup.Store) {
	id := UniqueID(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Claim(ctx, id, long); err == nil {
		t.Fatal("Claim with a cancelled context succeeded")
	}
	mustClaim(t, s, id, long, dedup.Claimed)
}

func testBatch(t *testing.T, s dedup.Store) {
	b, ok := s.(dedup.BatchClaimer)
	if !ok {
		t.Skip("store does not implement dedup.BatchClaimer")
	}
	ctx := ctxT(t)
	if got, err := b.ClaimBatch(ctx, nil, long); err != nil || len(got) != 0 {
		t.Fatalf("ClaimBatch(nil) = %v, %v; want empty, nil", got, err)
	}
	base := UniqueID(t)
	fresh1, done, busy, fresh2 := base+" fresh1", base+" done", base+" busy", base+" fresh2"
	c := mustClaim(t, s, done, long, dedup.Claimed)
	if err := s.Done(ctx, done, c.Token, long); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, busy, long, dedup.Claimed)
	ids := []string{fresh1, done, busy, fresh1, fresh2}
	got, err := b.ClaimBatch(ctx, ids, long)
	if err != nil {
		t.Fatalf("ClaimBatch: %v", err)
	}
	want := []dedup.State{dedup.Claimed, dedup.Done, dedup.InProgress, dedup.InProgress, dedup.Claimed}
	if len(got) != len(want) {
		t.Fatalf("ClaimBatch returned %d claims for %d ids", len(got), len(ids))
	}
	for i := range want {
		if got[i].State != want[i] {
			t.Errorf("ClaimBatch[%d] (%q) = %v, want %v", i, ids[i], got[i].State, want[i])
		}
	}
	if got[0].Token == "" || got[4].Token == "" || got[0].Token == got[4].Token {
		t.Fatalf("batch tokens %q, %q: want two distinct non-empty tokens", got[0].Token, got[4].Token)
	}
	if err := s.Done(ctx, fresh1, got[0].Token, long); err != nil {
		t.Fatalf("Done with a batch token: %v", err)
	}
	if err := s.Release(ctx, fresh2, got[4].Token); err != nil {
		t.Fatalf("Release with a batch token: %v", err)
	}
	mustClaim(t, s, fresh1, long, dedup.Done)
	mustClaim(t, s, fresh2, long, dedup.Claimed)
	testConcurrentBatches(t, b, base)
}

// testConcurrentBatches checks that a large batch claims every id exactly
// once against a concurrent one.
func testConcurrentBatches(t *testing.T, b dedup.BatchClaimer, base string) {
	ctx := ctxT(t)
	many := make([]string, 500)
	for i := range many {
		many[i] = fmt.Sprintf("%s many %d", base, i)
	}
	var (
		wg   sync.WaitGroup
		res  [2][]dedup.Claim
		errs [2]error
	)
	for k := range 2 {
		wg.Go(func() { res[k], errs[k] = b.ClaimBatch(ctx, many, long) })
	}
	wg.Wait()
	for k := range 2 {
		if errs[k] != nil {
			t.Fatalf("concurrent ClaimBatch: %v", errs[k])
		}
	}
	for i := range many {
		n := 0
		for k := range 2 {
			if res[k][i].State == dedup.Claimed {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("id %d claimed by %d of 2 concurrent batches, want 1", i, n)
		}
	}
}
