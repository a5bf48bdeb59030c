package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(*testing.T) idem.Store { return memstore.New() })
}

func TestTokens(t *testing.T) {
	t.Parallel()
	idemtest.RunTokens(t, func(*testing.T) idem.TokenStore { return memstore.New() })
}

func TestExpiredEntriesAreSwept(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	s := memstore.New(memstore.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	for i := range 100 {
		c, err := s.Claim(ctx, idem.Key("k", string(rune('a'+i%26)), idem.NewToken()), "", time.Second)
		if err != nil || c.State != idem.Claimed {
			t.Fatal(c, err)
		}
	}
	if n := s.Len(); n != 100 {
		t.Fatalf("Len = %d, want 100", n)
	}
	now = now.Add(2 * time.Second)
	if n := s.Len(); n != 0 {
		t.Fatalf("Len after expiry = %d, want 0", n)
	}
}
