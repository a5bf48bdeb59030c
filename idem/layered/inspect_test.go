package layered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// A forgotten payment is gone from Redis and from the database: a replay
// left in the front would keep answering the customer's retry.
func TestForgetClearsBothStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	front, _, _ := redisFront(t, testsvc.RedisAddr(t))
	back, _, _ := pgBack(t)
	s := layered.New(front, back)
	key := idemtest.UniqueKey(t)
	c, err := s.Claim(ctx, key, "fp", time.Minute)
	if err != nil || c.State != idem.Claimed {
		t.Fatal(c, err)
	}
	if err := s.Record(ctx, key, c.Token, []byte("ch_1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, key, false); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]idem.Inspector{"front": front, "back": back} {
		if r, err := in.Lookup(ctx, key); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("%s after Forget: %+v %v, want ErrNotFound", name, r, err)
		}
	}
}

// An outcome only the front holds (the back lost it, or it was forgotten
// there alone) is found and forgotten through the layered store.
func TestFrontOnlyRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	front, _, _ := redisFront(t, testsvc.RedisAddr(t))
	back, _, _ := pgBack(t)
	s := layered.New(front, back)
	key := idemtest.UniqueKey(t)
	c, err := front.Claim(ctx, key, "fp", time.Minute)
	if err != nil || c.State != idem.Claimed {
		t.Fatal(c, err)
	}
	if err := front.Record(ctx, key, c.Token, []byte("ch_1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Lookup(ctx, key); err != nil || r.State != idem.Done || string(r.Result) != "ch_1" {
		t.Fatalf("Lookup = %+v, %v; want the front's outcome", r, err)
	}
	if err := s.Forget(ctx, key, false); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := front.Lookup(ctx, key); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("front after Forget: %v, want ErrNotFound", err)
	}
	if err := s.Forget(ctx, key, false); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("second Forget = %v, want ErrNotFound", err)
	}
}

// A store that cannot be inspected makes both calls fail clearly.
type plainStore struct{ idem.Store }

func TestNotInspectable(t *testing.T) {
	t.Parallel()
	s := layered.New(plainStore{memstore.New()}, memstore.New())
	if _, err := s.Lookup(t.Context(), "k"); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("Lookup with a front that cannot be inspected = %v, want ErrInvalid", err)
	}
	if err := s.Forget(t.Context(), "k", false); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("Forget with a front that cannot be inspected = %v, want ErrInvalid", err)
	}
}
