package idemurl_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

func open(t *testing.T, raw string) idemurl.Store {
	t.Helper()
	s, err := idemurl.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", idemurl.Redact(raw), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// shared checks that a and b, opened from the same URL, are one key space:
// a's claim is in progress for b, and a's outcome is replayed to b.
func shared(t *testing.T, a, b idemurl.Store) {
	t.Helper()
	ctx := t.Context()
	key := idemtest.UniqueKey(t)
	c, err := a.Claim(ctx, key, "fp", time.Minute)
	if err != nil || c.State != idem.Claimed {
		t.Fatalf("claim on a: %+v %v", c, err)
	}
	if c2, err := b.Claim(ctx, key, "fp", time.Minute); err != nil || c2.State != idem.InProgress {
		t.Fatalf("claim on b while a holds it: %+v %v", c2, err)
	}
	if err := a.Record(ctx, key, c.Token, []byte("outcome"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if c3, err := b.Claim(ctx, key, "fp", time.Minute); err != nil || c3.State != idem.Done || string(c3.Result) != "outcome" {
		t.Fatalf("b after a recorded: %+v %v", c3, err)
	}
	if err := a.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	raw := "sqlite://" + filepath.Join(t.TempDir(), "sub dir", "idem.db")
	if _, err := idemurl.Open(t.Context(), raw); err == nil {
		t.Fatal("opened a file in a directory that does not exist")
	}
	raw = "sqlite://" + filepath.Join(t.TempDir(), "idem #1.db")
	shared(t, open(t, raw), open(t, raw))
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	raw := testsvc.PostgresURL(t)
	shared(t, open(t, raw), open(t, raw))
}

func TestRedisPrefix(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t) // deletes the prefix's keys at the end
	addr := c.Options().Addr
	raw := "redis://" + addr + "/0?prefix=" + prefix + "&dial_timeout=2s"
	a, b := open(t, raw), open(t, raw)
	shared(t, a, b)
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys under the prefix: %v %v, want the one record", keys, err)
	}
	c.Del(context.Background(), keys...)
	// Another prefix is another key space.
	otherPrefix := testsvc.KeyPrefix(t)
	other := open(t, "redis://"+addr+"/0?prefix="+otherPrefix)
	key := idemtest.UniqueKey(t)
	if _, err := a.Claim(t.Context(), key, "fp", time.Minute); err != nil {
		t.Fatal(err)
	}
	if cl, err := other.Claim(t.Context(), key, "fp", time.Minute); err != nil || cl.State != idem.Claimed {
		t.Fatalf("another prefix saw the claim: %+v %v", cl, err)
	}
	testsvc.DeleteKeys(c, otherPrefix)
}

func TestMem(t *testing.T) {
	t.Parallel()
	s := open(t, "mem://")
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := idemurl.Open(t.Context(), "mem://host/x"); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("mem:// with a host: %v", err)
	}
}

func TestMySQL(t *testing.T) {
	t.Parallel()
	raw := testsvc.MySQLURL(t)
	shared(t, open(t, raw), open(t, raw+"?clientFoundRows=true"))
}

func TestBadURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw     string
		invalid bool
		says    string
	}{
		{"consul://u:hunter22@h", true, "supported: mem://, mysql://, postgres://"},
		{"mysql://u:hunter22@127.0.0.1", true, "names no database"},
		{"mysql://u:hunter22@127.0.0.1:1/db?timeout=1s", false, "127.0.0.1:1"},
		{"no-scheme", true, "has no scheme"},
		{"postgres://u:hunter22@[::1/db", true, "cannot parse"},
		{"sqlite://host/x.db", true, "has host"},
		{"sqlite:///", true, "names no file"},
		{"redis://127.0.0.1:6379/0?prefix=", true, "prefix"},
		{"redis://127.0.0.1:6379/0?bogus_option=1", true, "bogus_option"},
		{"redis-cluster://?prefix=x", true, "names no node"},
		{"redis://u:hunter22@127.0.0.1:1/0?dial_timeout=100ms&max_retries=-1", false, "127.0.0.1:1"},
		{"postgres://u:hunter22@127.0.0.1:1/db?connect_timeout=1", false, "127.0.0.1"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			s, err := idemurl.Open(t.Context(), tc.raw)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if errors.Is(err, idem.ErrInvalid) != tc.invalid {
				t.Errorf("errors.Is(err, idem.ErrInvalid) = %v: %v", !tc.invalid, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "hunter22") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestSchemes(t *testing.T) {
	got := strings.Join(idemurl.Schemes(), " ")
	if want := "mem mysql postgres postgresql redis redis-cluster rediss sqlite"; got != want {
		t.Fatalf("Schemes() = %q, want %q", got, want)
	}
}

func TestSQLiteNewFileOpenedByManyProcesses(t *testing.T) {
	if raw, ok := testsvc.AtOnceChild(); ok {
		s, err := idemurl.Open(context.Background(), raw)
		if err == nil {
			err = s.Close()
		}
		testsvc.ExitAtOnce(err)
	}
	t.Parallel()
	for round := range 10 {
		testsvc.RunAtOnce(t, "TestSQLiteNewFileOpenedByManyProcesses", "sqlite://"+filepath.Join(t.TempDir(), "idem.db"), 8)
		if t.Failed() {
			t.Fatalf("round %d: not every process opened the file", round)
		}
	}
}
