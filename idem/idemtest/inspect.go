package idemtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/suitekit"
)

// inspectCases check the idem.Inspector contract on the stores newStore
// opens; Run runs them, and they skip a store that does not implement it.
func inspectCases(newStore func(*testing.T) idem.Store) suitekit.Cases {
	on := func(fn func(*testing.T, idem.Inspector, idem.Store)) func(*testing.T) {
		return func(t *testing.T) {
			s := newStore(t)
			in, ok := s.(idem.Inspector)
			if !ok {
				t.Skipf("%T does not implement idem.Inspector", s)
			}
			fn(t, in, s)
		}
	}
	return suitekit.Cases{
		{"InspectLookup", on(testInspectLookup)},
		{"InspectForgetDoneLetsNextRun", on(testInspectForgetDone)},
		{"InspectForgetInProgressRefusedUnlessForced", on(testInspectForgetInProgress)},
		{"InspectEndsWithDeadline", on(testInspectEndsWithDeadline)},
		{"InspectBadKeysRefusedBeforeTheStore", on(testInspectBadKeys)},
	}
}

// slack absorbs the clock skew between the store and the test: times the
// store reports are compared with local ones.
const slack = 2 * time.Second

func lookup(t *testing.T, in idem.Inspector, key string) idem.Record {
	t.Helper()
	r, err := in.Lookup(ctxT(t), key)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", key, err)
	}
	return r
}

func wantNotFound(t *testing.T, in idem.Inspector, key string) {
	t.Helper()
	if r, err := in.Lookup(ctxT(t), key); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Lookup(%q) = %+v, %v; want ErrNotFound", key, r, err)
	}
}

func within(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-slack)) || got.After(hi.Add(slack)) {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

func testInspectLookup(t *testing.T, in idem.Inspector, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	wantNotFound(t, in, key)
	start := time.Now()
	c := mustClaim(t, s, key, "fp-1", long, idem.Claimed)
	r := lookup(t, in, key)
	if r.State != idem.InProgress || r.Fingerprint != "fp-1" || r.Result != nil {
		t.Fatalf("Lookup of a claim = %+v, want InProgress with fingerprint fp-1 and no result", r)
	}
	within(t, "in-progress deadline", r.Expires, start.Add(long), time.Now().Add(long))
	if !r.Created.IsZero() {
		within(t, "Created", r.Created, start, time.Now())
	}
	if err := s.Record(ctx, key, c.Token, []byte(`{"paid":100}`), 2*long); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r = lookup(t, in, key)
	if r.State != idem.Done || r.Fingerprint != "fp-1" || string(r.Result) != `{"paid":100}` {
		t.Fatalf("Lookup of an outcome = %+v, want Done, fp-1, the result", r)
	}
	within(t, "end of retention", r.Expires, before.Add(2*long), time.Now().Add(2*long))
	// Looking changes nothing: the outcome still replays.
	if d := mustClaim(t, s, key, "fp-1", long, idem.Done); string(d.Result) != `{"paid":100}` {
		t.Fatalf("replay after Lookup = %q", d.Result)
	}
}

func testInspectForgetDone(t *testing.T, in idem.Inspector, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	neighbour := key + "x"
	for _, k := range []string{key, neighbour} {
		c := mustClaim(t, s, k, "fp", long, idem.Claimed)
		if err := s.Record(ctx, k, c.Token, []byte("charged"), long); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Forget(ctx, key, false); err != nil {
		t.Fatalf("Forget of an outcome: %v", err)
	}
	wantNotFound(t, in, key)
	mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := in.Forget(ctx, UniqueKey(t), false); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Forget of an unknown key = %v, want ErrNotFound", err)
	}
	if r := lookup(t, in, neighbour); r.State != idem.Done {
		t.Errorf("the neighbouring key is %v after forgetting another, want done", r.State)
	}
}

func testInspectForgetInProgress(t *testing.T, in idem.Inspector, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	c := mustClaim(t, s, key, "fp", long, idem.Claimed)
	err := in.Forget(ctx, key, false)
	var ip *idem.InProgressError
	if !errors.Is(err, idem.ErrInProgress) || !errors.As(err, &ip) {
		t.Fatalf("unforced Forget of a running request = %v, want an *InProgressError", err)
	}
	if ip.RetryAfter <= 0 || ip.RetryAfter > long+slack {
		t.Errorf("refusal says the deadline is in %v, want within (0, %v]", ip.RetryAfter, long)
	}
	mustClaim(t, s, key, "fp", long, idem.InProgress)
	if err := in.Forget(ctx, key, true); err != nil {
		t.Fatalf("forced Forget of a running request: %v", err)
	}
	wantNotFound(t, in, key)
	mustClaim(t, s, key, "fp", long, idem.Claimed)
	if err := s.Record(ctx, key, c.Token, []byte("late"), long); !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("the forgotten claim's Record = %v, want ErrClaimLost", err)
	}
}

func testInspectEndsWithDeadline(t *testing.T, in idem.Inspector, s idem.Store) {
	ctx, key := ctxT(t), UniqueKey(t)
	start := time.Now()
	mustClaim(t, s, key, "fp", deadline, idem.Claimed)
	for {
		_, err := in.Lookup(ctx, key)
		if errors.Is(err, idem.ErrNotFound) {
			if el := time.Since(start); el < deadline {
				t.Fatalf("claim gone from Lookup after %v, before its %v deadline", el, deadline)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := in.Forget(ctx, key, true); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Forget of a claim past its deadline = %v, want ErrNotFound", err)
	}
}

func testInspectBadKeys(t *testing.T, in idem.Inspector, _ idem.Store) {
	// A cancelled context fails any call that reaches the store; a bad key
	// must be refused before that.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, key := range []string{"", strings.Repeat("k", idem.MaxKeyLen+1), "pay\x00ment", "\xff"} {
		if _, err := in.Lookup(ctx, key); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("Lookup(%q) = %v, want ErrInvalidKey", key, err)
		}
		for _, force := range []bool{false, true} {
			if err := in.Forget(ctx, key, force); !errors.Is(err, idem.ErrInvalidKey) {
				t.Errorf("Forget(%q, %v) = %v, want ErrInvalidKey", key, force, err)
			}
		}
	}
}
