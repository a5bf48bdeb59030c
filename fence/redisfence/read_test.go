package redisfence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/redisfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The lost update of a fenced read-modify-write, forced step by step: the
// stale holder (token 1) reads 1000 and is paused; the fresh holder (token 2)
// reads 1000; the stale holder wakes and debits 100; the fresh holder debits
// 300 from its read. With fenced writes alone both are applied and the
// balance is 700, not 600: the stale debit, acknowledged, is lost. With the
// reads made by Guard.Read the stale debit is refused and the balance shows
// exactly the debits that were acknowledged.
func TestReadModifyWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		// read reads key for the holder of token tok.
		read  func(ctx context.Context, c *redis.Client, g *redisfence.Guard, tok uint64, key string) (string, error)
		check func(t *testing.T, staleErr error, final int64)
	}{
		{
			name: "write-only fencing loses the update",
			read: func(ctx context.Context, c *redis.Client, _ *redisfence.Guard, _ uint64, key string) (string, error) {
				return c.Get(ctx, key).Result()
			},
			check: func(t *testing.T, staleErr error, final int64) {
				if staleErr != nil || final != 700 {
					t.Fatalf("stale write %v, balance %d: the interleaving did not lose the stale debit", staleErr, final)
				}
			},
		},
		{
			name: "read claims first",
			read: func(ctx context.Context, _ *redis.Client, g *redisfence.Guard, tok uint64, key string) (string, error) {
				return g.Read(ctx, fence.Token(tok), key)
			},
			check: func(t *testing.T, staleErr error, final int64) {
				if !errors.Is(staleErr, fence.ErrStale) {
					t.Fatalf("stale holder's write after the claim: %v, want fence.ErrStale", staleErr)
				}
				if final != 700 {
					t.Fatalf("balance %d, want 1000 - 300 = 700", final)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			key := testsvc.KeyPrefix(t) + "balance"
			c, g := guarded(t, key)
			if err := c.Set(ctx, key, 1000, 0).Err(); err != nil {
				t.Fatal(err)
			}
			read := func(tok uint64) int64 {
				t.Helper()
				s, err := tc.read(ctx, c, g, tok, key)
				if err != nil {
					t.Fatalf("read with token %d: %v", tok, err)
				}
				n, _ := strconv.ParseInt(s, 10, 64)
				return n
			}
			staleRead := read(1) // then paused
			freshRead := read(2)
			staleErr := g.Set(ctx, fence.Token(1), key, staleRead-100, 0)
			if err := g.Set(ctx, fence.Token(2), key, freshRead-300, 0); err != nil {
				t.Fatalf("fresh holder's write: %v", err)
			}
			final, _ := c.Get(ctx, key).Int64()
			tc.check(t, staleErr, final)
		})
	}
}

func TestRead(t *testing.T) {
	ctx := t.Context()
	key := testsvc.KeyPrefix(t) + "v"
	hkey := "{" + testsvc.KeyPrefix(t) + "order}:7"
	missing := testsvc.KeyPrefix(t) + "missing"
	c, g := guarded(t, key, hkey, missing)

	if err := g.Set(ctx, fence.Token(3), key, "a", 0); err != nil {
		t.Fatal(err)
	}
	if v, err := g.Read(ctx, fence.Token(5), key); err != nil || v != "a" {
		t.Fatalf("read: %q, %v", v, err)
	}
	if _, tok, _ := g.Get(ctx, key); tok != 5 {
		t.Fatalf("token %d after a read with 5", tok)
	}
	if v, err := g.Read(ctx, fence.Token(5), key); err != nil || v != "a" {
		t.Fatalf("the same holder reads again: %q, %v", v, err)
	}
	if _, err := g.Read(ctx, fence.Token(4), key); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale read: %v", err)
	}
	if err := g.Set(ctx, fence.Token(4), key, "stale", 0); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write with a token below the read's: %v", err)
	}

	// A claim on a key with no value is made: a stale holder cannot create it.
	if _, err := g.Read(ctx, fence.Token(9), missing); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("read of a missing key: %v", err)
	}
	if err := g.Set(ctx, fence.Token(8), missing, "stale", 0); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale holder created a claimed key: %v", err)
	}

	if err := g.HSet(ctx, fence.Token(2), hkey, "status", "PENDING", "amount", "1200"); err != nil {
		t.Fatal(err)
	}
	if m, err := g.HRead(ctx, fence.Token(3), hkey); err != nil || len(m) != 2 || m["status"] != "PENDING" || m["amount"] != "1200" {
		t.Fatalf("HRead all: %v, %v", m, err)
	}
	if m, err := g.HRead(ctx, fence.Token(3), hkey, "status", "nope"); err != nil || len(m) != 1 || m["status"] != "PENDING" {
		t.Fatalf("HRead fields: %v, %v", m, err)
	}
	if _, err := g.HRead(ctx, fence.Token(2), hkey); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale HRead: %v", err)
	}
	if _, err := g.HRead(ctx, fence.Token(9), missing+"h"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("HRead of a missing key: %v", err)
	}
	cleanup(t, c, g, missing+"h")

	// A wrong type is the server's error, and changes nothing.
	if _, err := g.Read(ctx, fence.Token(7), hkey); err == nil || errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("GET of a hash: %v", err)
	}
	if _, tok, _ := g.Get(ctx, key); tok != 5 {
		t.Fatalf("token %d", tok)
	}
	if tok, _ := c.Get(ctx, mustTokenKey(t, g, hkey)).Uint64(); tok != 3 {
		t.Fatalf("hash's token %d after a refused read, want 3", tok)
	}

	for name, err := range map[string]error{
		"nil holder": func() error { _, err := g.Read(ctx, nil, key); return err }(),
		"empty key":  func() error { _, err := g.HRead(ctx, fence.Token(1), ""); return err }(),
	} {
		if !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustTokenKey(t *testing.T, g *redisfence.Guard, key string) string {
	t.Helper()
	tk, err := g.TokenKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
