package deduptest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/suitekit"
)

// inspectCases check the dedup.Inspector contract on the stores newStore
// opens; Run runs them, and they skip a store that does not implement it.
func inspectCases(newStore func(*testing.T) dedup.Store) suitekit.Cases {
	on := func(fn func(*testing.T, dedup.Inspector, dedup.Store)) func(*testing.T) {
		return func(t *testing.T) {
			s := newStore(t)
			in, ok := s.(dedup.Inspector)
			if !ok {
				t.Skipf("%T does not implement dedup.Inspector", s)
			}
			fn(t, in, s)
		}
	}
	return suitekit.Cases{
		{"InspectLookup", on(testInspectLookup)},
		{"InspectForgetDoneLetsNextCopyRun", on(testInspectForgetDone)},
		{"InspectForgetInProgressRefusedUnlessForced", on(testInspectForgetInProgress)},
		{"InspectBadIDsRefusedBeforeTheStore", on(testInspectBadIDs)},
	}
}

// slack absorbs the clock skew between the store and the test.
const slack = 2 * time.Second

func wantNoMark(t *testing.T, in dedup.Inspector, id string) {
	t.Helper()
	if m, err := in.Lookup(ctxT(t), id); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("Lookup(%q) = %+v, %v; want ErrNotFound", id, m, err)
	}
}

func testInspectLookup(t *testing.T, in dedup.Inspector, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	wantNoMark(t, in, id)
	start := time.Now()
	c := mustClaim(t, s, id, long, dedup.Claimed)
	m, err := in.Lookup(ctx, id)
	if err != nil || m.State != dedup.InProgress {
		t.Fatalf("Lookup of a claim = %+v, %v; want InProgress", m, err)
	}
	if !m.Expires.IsZero() && (m.Expires.Before(start.Add(long-slack)) || m.Expires.After(time.Now().Add(long+slack))) {
		t.Errorf("claim ends at %v, want about %v from now", m.Expires, long)
	}
	if err := s.Done(ctx, id, c.Token, 2*long); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if m, err = in.Lookup(ctx, id); err != nil || m.State != dedup.Done {
		t.Fatalf("Lookup of a done id = %+v, %v; want Done", m, err)
	}
	if !m.Expires.IsZero() && (m.Expires.Before(before.Add(2*long-slack)) || m.Expires.After(time.Now().Add(2*long+slack))) {
		t.Errorf("retention ends at %v, want about %v from now", m.Expires, 2*long)
	}
	mustClaim(t, s, id, long, dedup.Done) // looking changed nothing
}

func testInspectForgetDone(t *testing.T, in dedup.Inspector, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	neighbour := id + "}"
	for _, i := range []string{id, neighbour} {
		c := mustClaim(t, s, i, long, dedup.Claimed)
		if err := s.Done(ctx, i, c.Token, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Forget(ctx, id, false); err != nil {
		t.Fatalf("Forget of a done id: %v", err)
	}
	wantNoMark(t, in, id)
	mustClaim(t, s, id, long, dedup.Claimed)
	if err := in.Forget(ctx, UniqueID(t), false); !errors.Is(err, dedup.ErrNotFound) {
		t.Errorf("Forget of an unknown id = %v, want ErrNotFound", err)
	}
	mustClaim(t, s, neighbour, long, dedup.Done)
}

func testInspectForgetInProgress(t *testing.T, in dedup.Inspector, s dedup.Store) {
	ctx, id := ctxT(t), UniqueID(t)
	c := mustClaim(t, s, id, long, dedup.Claimed)
	err := in.Forget(ctx, id, false)
	var ip *dedup.InProgressError
	if !errors.Is(err, dedup.ErrInProgress) || !errors.As(err, &ip) {
		t.Fatalf("unforced Forget of a claim = %v, want an *InProgressError", err)
	}
	if ip.RetryAfter < 0 || ip.RetryAfter > long+slack {
		t.Errorf("refusal says the claim ends in %v, want within [0, %v]", ip.RetryAfter, long)
	}
	mustClaim(t, s, id, long, dedup.InProgress)
	if err := in.Forget(ctx, id, true); err != nil {
		t.Fatalf("forced Forget: %v", err)
	}
	mustClaim(t, s, id, long, dedup.Claimed)
	if err := s.Done(ctx, id, c.Token, long); !errors.Is(err, dedup.ErrClaimLost) {
		t.Fatalf("the forgotten claim's Done = %v, want ErrClaimLost", err)
	}
}

func testInspectBadIDs(t *testing.T, in dedup.Inspector, _ dedup.Store) {
	CheckBadIDsRefused(t, in)
}

// CheckBadIDsRefused checks that in refuses bad message ids with
// dedup.ErrInvalidID before reaching its server: the calls are made with a
// cancelled context, which any call that reached the server would report.
func CheckBadIDsRefused(t *testing.T, in dedup.Inspector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, id := range []string{"", strings.Repeat("m", dedup.MaxIDLen+1), "msg\x00", "\xff"} {
		if _, err := in.Lookup(ctx, id); !errors.Is(err, dedup.ErrInvalidID) {
			t.Errorf("Lookup(%q) = %v, want ErrInvalidID", id, err)
		}
		for _, force := range []bool{false, true} {
			if err := in.Forget(ctx, id, force); !errors.Is(err, dedup.ErrInvalidID) {
				t.Errorf("Forget(%q, %v) = %v, want ErrInvalidID", id, force, err)
			}
		}
	}
}
