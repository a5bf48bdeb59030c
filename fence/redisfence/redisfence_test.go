package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/redisfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// guarded returns a client of the shared Redis and a Guard on it, and
// deletes keys and their token keys when the test ends.
func guarded(t *testing.T, keys ...string) (*redis.Client, *redisfence.Guard) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	g, err := redisfence.New(c)
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, c, g, keys...)
	return c, g
}

// cleanup deletes keys and their token keys when the test ends.
func cleanup(t *testing.T, c *redis.Client, g *redisfence.Guard, keys ...string) {
	t.Cleanup(func() {
		for _, k := range keys {
			tk, _ := g.TokenKey(k)
			c.Del(context.Background(), k, tk)
		}
	})
}

func TestSet(t *testing.T) {
	ctx := t.Context()
	key := testsvc.KeyPrefix(t) + "balance"
	c, g := guarded(t, key)
	wantV, wantT := "", uint64(0)
	for _, s := range []struct {
		token uint64
		value string
		want  error
	}{
		{5, "a", nil}, {5, "b", nil}, {4, "x", fence.ErrStale}, {1 << 60, "c", nil},
		{1<<60 - 1, "x", fence.ErrStale}, // differs from the stored token only beyond a double's precision
		{math.MaxInt64, "d", nil}, {math.MaxInt64 - 1, "x", fence.ErrStale},
	} {
		err := g.Set(ctx, fence.Token(s.token), key, s.value, 0)
		if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
			t.Fatalf("token %d: %v, want %v", s.token, err, s.want)
		}
		if s.want == nil {
			wantV, wantT = s.value, s.token
		}
		v, tok, err := g.Get(ctx, key)
		if err != nil || v != wantV || tok != wantT {
			t.Fatalf("after token %d: (%q, %d, %v), want (%q, %d)", s.token, v, tok, err, wantV, wantT)
		}
		if got, _ := c.Get(ctx, key).Result(); got != wantV { // a plain GET sees the value
			t.Fatalf("GET %q, want %q", got, wantV)
		}
	}
}

func TestExpiryKeepsToken(t *testing.T) {
	ctx := t.Context()
	key := testsvc.KeyPrefix(t) + "session"
	c, g := guarded(t, key)
	if err := g.Set(ctx, fence.Token(9), key, "v", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("PTTL %v", ttl)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Exists(ctx, key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("value never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, tok, err := g.Get(ctx, key); !errors.Is(err, fence.ErrNotFound) || tok != 9 {
		t.Fatalf("after expiry: token %d, %v", tok, err)
	}
	if err := g.Set(ctx, fence.Token(8), key, "stale", 0); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale writer recreated an expired key: %v", err)
	}
}

func TestHSetAndDel(t *testing.T) {
	ctx := t.Context()
	key := "{" + testsvc.KeyPrefix(t) + "order}:7"
	c, g := guarded(t, key)
	if err := g.HSet(ctx, fence.Token(3), key, "status", "PAID", "amount", 1200); err != nil {
		t.Fatal(err)
	}
	if err := g.HSet(ctx, fence.Token(2), key, "status", "UNPAID"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale HSET: %v", err)
	}
	if got := c.HGetAll(ctx, key).Val(); got["status"] != "PAID" || got["amount"] != "1200" {
		t.Fatalf("hash %v", got)
	}
	if err := g.Del(ctx, fence.Token(2), key); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale DEL: %v", err)
	}
	if err := g.Del(ctx, fence.Token(4), key); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, key).Val() != 0 {
		t.Fatal("DEL not applied")
	}
	if err := g.HSet(ctx, fence.Token(3), key, "status", "UNPAID"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale writer recreated a deleted key: %v", err)
	}
}

// TestConcurrentWriters races writers with distinct tokens on one key; the
// value written is the token, so the key is consistent iff value == token,
// and the highest token must win.
func TestConcurrentWriters(t *testing.T) {
	ctx := t.Context()
	key := testsvc.KeyPrefix(t) + "race"
	_, g := guarded(t, key)
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				tok := uint64(i*writers + w + 1)
				if err := g.Set(ctx, fence.Token(tok), key, tok, 0); err != nil && !errors.Is(err, fence.ErrStale) {
					errs <- err
				}
				if v, tk, err := g.Get(ctx, key); err == nil && v != strconv.FormatUint(tk, 10) {
					errs <- fmt.Errorf("value %s under token %d", v, tk)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v, tk, err := g.Get(ctx, key); err != nil || tk != writers*perWriter || v != strconv.Itoa(writers*perWriter) {
		t.Fatalf("final (%q, %d, %v)", v, tk, err)
	}
}

func TestBadInput(t *testing.T) {
	// No server is touched: the client points nowhere.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	if _, err := redisfence.New(nil); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	for _, s := range []string{"", "{x}", "a{"} {
		if _, err := redisfence.New(c, redisfence.WithTokenSuffix(s)); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("suffix %q: %v", s, err)
		}
	}
	g, _ := redisfence.New(c)
	ctx := t.Context()
	for name, err := range map[string]error{
		"nil holder":     g.Set(ctx, nil, "k", "v", 0),
		"token 0":        g.Set(ctx, fence.Token(0), "k", "v", 0),
		"huge token":     g.Set(ctx, fence.Token(math.MaxInt64+1), "k", "v", 0),
		"empty key":      g.Set(ctx, fence.Token(1), "", "v", 0),
		"untaggable key": g.Set(ctx, fence.Token(1), "a}b", "v", 0),
		"negative ttl":   g.Set(ctx, fence.Token(1), "k", "v", -time.Second),
		"odd HSET":       g.HSet(ctx, fence.Token(1), "k", "f"),
		"empty HSET":     g.HSet(ctx, fence.Token(1), "k"),
	} {
		if !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTokenKeySlot checks that every token key lands in its key's Redis
// Cluster hash slot, so the script is legal on a Cluster.
func TestTokenKeySlot(t *testing.T) {
	g, _ := redisfence.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	keys := []string{"balance:7", "{user1}.balance", "a{b", "{}x", "x{}", "a{b}c{d}", "{", "{{a}}", "é{ü}"}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}:")
	for range 2000 {
		k := make([]byte, 1+r.IntN(8))
		for i := range k {
			k[i] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(k))
	}
	refused := 0
	for _, k := range keys {
		tk, err := g.TokenKey(k)
		if err != nil {
			refused++
			if !errors.Is(err, fence.ErrInvalid) {
				t.Fatalf("%q: %v", k, err)
			}
			if hashPart(k) != k || !strings.Contains(k, "}") {
				t.Fatalf("%q refused although a token key can share its slot", k)
			}
			continue
		}
		if slot(tk) != slot(k) {
			t.Fatalf("token key %q in slot %d, key %q in slot %d", tk, slot(tk), k, slot(k))
		}
	}
	t.Logf("%d keys, %d refused (no hash tag, contain '}')", len(keys), refused)
}

// hashPart is the part of key Redis Cluster hashes.
func hashPart(key string) string {
	for s := 0; s < len(key); s++ {
		if key[s] == '{' {
			for e := s + 1; e < len(key); e++ {
				if key[e] == '}' {
					if e == s+1 {
						return key
					}
					return key[s+1 : e]
				}
			}
			return key
		}
	}
	return key
}

// slot is Redis Cluster's CRC16 (XMODEM) of the hash part, mod 16384.
func slot(key string) uint16 {
	var crc uint16
	for _, b := range []byte(hashPart(key)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
