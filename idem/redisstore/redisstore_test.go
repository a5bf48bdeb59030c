package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

const (
	envAddr   = "IDEM_REDISSTORE_ADDR"
	envPrefix = "IDEM_REDISSTORE_PREFIX"
)

func TestMain(m *testing.M) {
	idemtest.CrashChild(func() (idem.Store, error) {
		c := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr)})
		return redisstore.New(c, redisstore.WithPrefix(os.Getenv(envPrefix))), nil
	})
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t)
	idemtest.Run(t, func(*testing.T) idem.Store { return redisstore.New(c, redisstore.WithPrefix(prefix)) })
}

func TestTokens(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t)
	idemtest.RunTokens(t, func(*testing.T) idem.TokenStore { return redisstore.New(c, redisstore.WithPrefix(prefix)) })
}

func TestCrashedHandlerTakenOverAfterDeadline(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t)
	idemtest.Crash(t, redisstore.New(c, redisstore.WithPrefix(prefix)),
		envAddr+"="+c.Options().Addr, envPrefix+"="+prefix)
}

func TestOneRoundTripToClaimAndToReplay(t *testing.T) {
	t.Parallel()
	s, c, _ := teststores.Redis(t)
	sent := testsvc.CountCommands(c)
	ctx := context.Background()
	// Warm the script cache: the first EVALSHA of a script may need an EVAL.
	warm, err := s.Claim(ctx, "warm", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "warm", warm.Token, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	count := func(name string, fn func()) {
		t.Helper()
		before := sent.Counts()
		fn()
		var n int64
		for _, k := range sent.Since(before) {
			n += k
		}
		if n != 1 {
			t.Errorf("%s took %d Redis commands, want 1", name, n)
		}
	}
	var cl idem.Claim
	count("claim", func() { cl, err = s.Claim(ctx, "k", "fp", time.Minute) })
	if err != nil || cl.State != idem.Claimed {
		t.Fatal(cl, err)
	}
	count("record", func() { err = s.Record(ctx, "k", cl.Token, []byte("r"), time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	count("replay", func() { cl, err = s.Claim(ctx, "k", "fp", time.Minute) })
	if err != nil || cl.State != idem.Done {
		t.Fatal(cl, err)
	}
}

func TestKeysCarryOneHashTag(t *testing.T) {
	t.Parallel()
	s := redisstore.New(nil)
	for _, k := range []string{"k", idem.Key("principal", "POST", "/pay", "abc")} {
		rk := s.RecordKey(k)
		if i := strings.IndexByte(rk, '{'); i < 0 || !strings.HasSuffix(rk, "}") || rk[i+1:len(rk)-1] != k {
			t.Errorf("RecordKey(%q) = %q, want the key inside one hash tag", k, rk)
		}
	}
}

func TestNilClient(t *testing.T) {
	t.Parallel()
	s := redisstore.New(nil)
	if _, err := s.Claim(context.Background(), "k", "", time.Second); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("Claim on nil client = %v, want ErrInvalid", err)
	}
}

// A bad sends-in-flight bound is refused on every call, and nothing is
// written.
func TestInvalidSendsInFlight(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t)
	for _, n := range []int{0, -1} {
		s := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithSendsInFlight(n))
		if _, err := s.Claim(context.Background(), "k", "", time.Second); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("Claim with %d sends in flight = %v, want ErrInvalid", n, err)
		}
		if err := s.Record(context.Background(), "k", idem.NewToken(), []byte("x"), time.Second); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("Record with %d sends in flight = %v, want ErrInvalid", n, err)
		}
	}
	if n, err := c.Exists(context.Background(), redisstore.New(c, redisstore.WithPrefix(prefix)).RecordKey("k")).Result(); err != nil || n != 0 {
		t.Errorf("record written by a refused store: %d, %v", n, err)
	}
}

// A Redis that stops answering must fail the claim with an error, never hand
// out a claim it did not make.
func TestServerDownFailsClosed(t *testing.T) {
	t.Parallel()
	addr := testsvc.RedisAddr(t)
	p := testsvc.NewProxy(t, addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	s := redisstore.New(c, redisstore.WithPrefix(testsvc.KeyPrefix(t)))
	p.Cut()
	runs := 0
	_, err := idem.Do(context.Background(), s, "k", func(context.Context) (int, error) { runs++; return 1, nil })
	if err == nil || runs != 0 {
		t.Fatalf("Do with Redis cut = %v after %d runs; want an error and no run", err, runs)
	}
}

// TestCancelledClaimsLeaveNoClaim has many goroutines claim with contexts that
// end at random moments, often while the claim is queued or in flight in a
// pipeline. A claim that reached Redis after its caller gave up must be
// released, so soon every such key can be claimed again, long before the
// in-progress deadline.
func TestCancelledClaimsLeaveNoClaim(t *testing.T) {
	t.Parallel()
	s, _, _ := teststores.Redis(t)
	const goroutines, rounds = 32, 20
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		abandoned []string
	)
	for g := range goroutines {
		wg.Go(func() {
			keys := claimWithRandomDeadlines(t, s, g, rounds)
			mu.Lock()
			abandoned = append(abandoned, keys...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(abandoned) == 0 {
		t.Log("no claim was cancelled; nothing to check")
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, key := range abandoned {
		for {
			cl, err := s.Claim(context.Background(), key, "fp", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if cl.State == idem.Claimed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still %v after its caller gave up", key, cl.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("%d of %d claims cancelled", len(abandoned), goroutines*rounds)
}

// claimWithRandomDeadlines claims rounds fresh keys of goroutine g, each
// with a context that ends within 2 ms, and releases those it gets. It
// returns the keys whose caller gave up before the answer.
func claimWithRandomDeadlines(t *testing.T, s *redisstore.Store, g, rounds int) []string {
	var abandoned []string
	for i := range rounds {
		key := fmt.Sprint("k", g, ":", i)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(2000))*time.Microsecond)
		cl, err := s.Claim(ctx, key, "fp", time.Hour)
		cancel()
		switch {
		case err == nil && cl.State == idem.Claimed:
			if err := s.Release(context.Background(), key, cl.Token); err != nil {
				t.Errorf("Release: %v", err)
			}
		case err == nil:
			t.Errorf("fresh key %s: state %v", key, cl.State)
		case errors.Is(err, context.DeadlineExceeded):
			abandoned = append(abandoned, key)
		default:
			t.Errorf("Claim: %v", err)
		}
	}
	return abandoned
}

// TestConformanceClaimScript runs the suite with the claim script that
// servers before Redis 7.0 get instead of SET NX GET.
func TestConformanceClaimScript(t *testing.T) {
	t.Parallel()
	c, prefix := testsvc.RedisClient(t)
	idemtest.Run(t, func(*testing.T) idem.Store {
		s := redisstore.New(c, redisstore.WithPrefix(prefix))
		redisstore.UseClaimScript(s)
		return s
	})
}

// TestRecordsOfEarlierVersions writes records in the hash layout earlier
// versions used, as an upgrade finds them: an outcome must still replay and
// a claim in progress must still hold others off; a key whose hash expired
// meanwhile is claimed in today's layout, which Record then finds.
func TestRecordsOfEarlierVersions(t *testing.T) {
	t.Parallel()
	s, c, _ := teststores.Redis(t)
	ctx := t.Context()

	done := s.RecordKey("done")
	if err := c.HSet(ctx, done, "s", "d", "f", "fp1", "r", "charged 42").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, "done", "fp1", time.Minute)
	if err != nil || got.State != idem.Done || got.Fingerprint != "fp1" || string(got.Result) != "charged 42" {
		t.Fatalf("Claim of an outcome in the hash layout = %+v, %v; want done, fp1, the result", got, err)
	}

	busy := s.RecordKey("busy")
	if err := c.HSet(ctx, busy, "s", "p", "t", "0123456789abcdef0123456789abcdef", "f", "fp2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, busy, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got, err = s.Claim(ctx, "busy", "fp2", time.Minute)
	if err != nil || got.State != idem.InProgress || got.Fingerprint != "fp2" || got.RetryAfter <= 0 || got.RetryAfter > time.Minute {
		t.Fatalf("Claim of a claim in the hash layout = %+v, %v; want in progress, fp2, a retry-after within a minute", got, err)
	}

	got, err = redisstore.ClaimHashPath(ctx, s, "gone", "fp3", time.Minute)
	if err != nil || got.State != idem.Claimed {
		t.Fatalf("hash-layout claim of an absent key = %+v, %v; want claimed", got, err)
	}
	if typ := c.Type(ctx, s.RecordKey("gone")).Val(); typ != "string" {
		t.Fatalf("a claim was written as a %s", typ)
	}
	if err := s.Record(ctx, "gone", got.Token, []byte("ok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	again, err := s.Claim(ctx, "gone", "fp3", time.Minute)
	if err != nil || again.State != idem.Done || again.Fingerprint != "fp3" || string(again.Result) != "ok" {
		t.Fatalf("Claim after Record = %+v, %v; want done, fp3, ok", again, err)
	}

	// An earlier version's claim (its script, as it was) fails on a record
	// written by this one instead of claiming the key again.
	err = earlierClaim.Run(ctx, c, []string{s.RecordKey("gone")}, idem.NewToken(), "fp3", 60000).Err()
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("an earlier version's claim of a record of this one = %v, want a WRONGTYPE error", err)
	}
}

// earlierClaim is the claim script of the versions that kept records as
// hashes.
var earlierClaim = redis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 's', 'f', 'r')
if r[1] == 'p' then
  return {2, r[2] or '', redis.call('PTTL', KEYS[1])}
end
if r[1] == 'd' then
  return {3, r[2] or '', r[3] or ''}
end
redis.call('HSET', KEYS[1], 's', 'p', 't', ARGV[1], 'f', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1}`)

// TestForeignTokenOwnsNothing: a token that is not the claim's, including
// one that is a prefix of it (the empty one), neither records nor releases
// the claim, which its owner then still can record.
func TestForeignTokenOwnsNothing(t *testing.T) {
	t.Parallel()
	s, _, _ := teststores.Redis(t)
	ctx := t.Context()
	cl, err := s.Claim(ctx, "k", "fp", time.Minute)
	if err != nil || cl.State != idem.Claimed {
		t.Fatalf("Claim = %+v, %v", cl, err)
	}
	for _, tok := range []string{"", cl.Token[:8], idem.NewToken(), cl.Token + "0"} {
		if err := s.Record(ctx, "k", tok, []byte("x"), time.Minute); !errors.Is(err, idem.ErrClaimLost) {
			t.Fatalf("Record with token %q = %v, want ErrClaimLost", tok, err)
		}
		if err := s.Release(ctx, "k", tok); !errors.Is(err, idem.ErrClaimLost) {
			t.Fatalf("Release with token %q = %v, want ErrClaimLost", tok, err)
		}
	}
	if err := s.Record(ctx, "k", cl.Token, []byte("mine"), time.Minute); err != nil {
		t.Fatalf("the owner's Record after foreign tokens: %v", err)
	}
}
