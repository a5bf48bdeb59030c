package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// newClient connects to the shared Redis and deletes the test's keys when it
// ends.
func newClient(t *testing.T) (*redis.Client, string) { return testsvc.RedisClient(t) }

func TestConformance(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	deduptest.Run(t, func(*testing.T) dedup.Store { return s })
}

// The script batches of servers before Redis 7.0 keep the same contract.
func TestConformanceScriptBatches(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix+"s:"))
	redisstore.UseScriptBatches(s)
	deduptest.Run(t, func(*testing.T) dedup.Store { return s })
}

// countingHook counts what reaches the wire: single commands and pipelines,
// and keeps the name of the last single command.
type countingHook struct {
	cmds, pipes atomic.Int32
	last        atomic.Value // string
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.last.Store(cmd.Name())
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.pipes.Add(1); return next(ctx, cmds) }
}

// Once the scripts are cached, a message costs one round trip to claim and
// one to mark done, and a batch of 100 ids one round trip to claim.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	warm, _ := s.Claim(ctx, "warm", time.Minute) // caches the scripts
	_ = s.Done(ctx, "warm", warm.Token, time.Minute)
	_, _ = s.ClaimBatch(ctx, []string{"warm2"}, time.Minute)
	h := &countingHook{}
	c.AddHook(h)

	cl, err := s.Claim(ctx, "m1", time.Minute)
	if err != nil || cl.State != dedup.Claimed {
		t.Fatalf("Claim: %v, %v", cl, err)
	}
	if n, name := h.cmds.Load(), h.last.Load(); n != 1 || name != "set" {
		t.Errorf("Claim sent %d commands, the last %v; want 1, a plain SET NX PX", n, name)
	}
	if err := s.Done(ctx, "m1", cl.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := h.cmds.Load(); n != 2 {
		t.Errorf("Claim+Done sent %d commands, want 2", n)
	}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("batch-%d", i)
	}
	got, err := s.ClaimBatch(ctx, ids, time.Minute)
	if err != nil || len(got) != 100 {
		t.Fatalf("ClaimBatch: %d claims, %v", len(got), err)
	}
	if p, n := h.pipes.Load(), h.cmds.Load(); p != 1 || n != 2 {
		t.Errorf("ClaimBatch of 100 used %d pipelines and %d extra commands, want 1 and 0", p, n-2)
	}
}

// A claim of an id in progress says when the owner's claim ends, read from
// the record's TTL, and a done id is done: the plain SET NX GET tells the
// three states apart as the script did.
func TestClaimStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	first, err := s.Claim(ctx, "m", time.Minute)
	if err != nil || first.State != dedup.Claimed || first.Token == "" {
		t.Fatalf("first Claim: %+v, %v", first, err)
	}
	again, err := s.Claim(ctx, "m", 10*time.Minute)
	if err != nil || again.State != dedup.InProgress {
		t.Fatalf("second Claim: %+v, %v; want in progress", again, err)
	}
	if again.RetryAfter <= 30*time.Second || again.RetryAfter > time.Minute {
		t.Errorf("RetryAfter = %v, want the first claim's remaining TTL, in (30s, 1m]", again.RetryAfter)
	}
	if pttl := c.PTTL(ctx, s.RecordKey("m")).Val(); pttl > time.Minute {
		t.Errorf("the refused claim changed the TTL to %v", pttl)
	}
	if v := c.Get(ctx, s.RecordKey("m")).Val(); v != first.Token {
		t.Errorf("the refused claim changed the record to %q", v)
	}
	if err := s.Done(ctx, "m", first.Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	done, err := s.Claim(ctx, "m", time.Minute)
	if err != nil || done.State != dedup.Done {
		t.Fatalf("Claim after Done: %+v, %v; want done", done, err)
	}
	if pttl := c.PTTL(ctx, s.RecordKey("m")).Val(); pttl <= time.Minute {
		t.Errorf("a claim of a done id changed its retention to %v", pttl)
	}
}

// The record is one short string per id under a hash tag of the id alone,
// and a done record keeps only the retention's TTL.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	if k := s.RecordKey("order-1"); k != prefix+"{order-1}" {
		t.Fatalf("RecordKey = %q", k)
	}
	cl, _ := s.Claim(ctx, "order-1", time.Minute)
	if err := s.Done(ctx, "order-1", cl.Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	if typ := c.Type(ctx, s.RecordKey("order-1")).Val(); typ != "string" {
		t.Errorf("record type %q, want string", typ)
	}
	if v := c.Get(ctx, s.RecordKey("order-1")).Val(); v != "=" {
		t.Errorf("done record %q, want \"=\"", v)
	}
	if ttl := c.PTTL(ctx, s.RecordKey("order-1")).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("done record TTL %v, want the retention (1h)", ttl)
	}
}

func TestInvalidConfiguration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := redisstore.New(nil).Claim(ctx, "x", time.Second); err == nil {
		t.Error("nil client: Claim succeeded")
	}
	c, _ := newClient(t)
	if _, err := redisstore.New(c, redisstore.WithPrefix("a{b}:")).Claim(ctx, "x", time.Second); err == nil {
		t.Error("prefix with braces: Claim succeeded")
	}
}

// A batch tells the three states apart on the same ids the single-id calls
// wrote, and an id given twice is claimed by its first occurrence.
func TestBatchStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	s := redisstore.New(c, redisstore.WithPrefix(prefix))
	done, err := s.Claim(ctx, "done", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Done(ctx, "done", done.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	busy, err := s.Claim(ctx, "busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimBatch(ctx, []string{"done", "busy", "new", "new"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []dedup.State{dedup.Done, dedup.InProgress, dedup.Claimed, dedup.InProgress}
	for i := range want {
		if got[i].State != want[i] {
			t.Errorf("claim %d = %v, want %v", i, got[i].State, want[i])
		}
	}
	if got[2].Token == "" || got[2].Token == busy.Token {
		t.Fatalf("batch claim token %q", got[2].Token)
	}
	// The batch's claim is a real one: Done with its token works, the
	// busy claim's owner is untouched, and the batch's TTL is set.
	if err := s.Done(ctx, "new", got[2].Token, time.Minute); err != nil {
		t.Errorf("Done with the batch's token: %v", err)
	}
	if err := s.Release(ctx, "busy", busy.Token); err != nil {
		t.Errorf("the batch disturbed another owner's claim: %v", err)
	}
	got, err = s.ClaimBatch(ctx, []string{"ttl"}, 30*time.Second)
	if err != nil || got[0].State != dedup.Claimed {
		t.Fatalf("ClaimBatch: %v, %v", got, err)
	}
	if ttl := c.PTTL(ctx, s.RecordKey("ttl")).Val(); ttl <= 25*time.Second || ttl > 30*time.Second {
		t.Errorf("batch claim TTL %v, want the processing TTL (30s)", ttl)
	}
}

// After SCRIPT FLUSH (as after a restart) a batch on the script path (that
// of servers before Redis 7.0) loads the script again and claims every id
// exactly once. Runs on a private server, which it flushes.
func TestBatchAfterScriptFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testsvc.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	s := redisstore.New(c)
	redisstore.UseScriptBatches(s)
	if _, err := s.ClaimBatch(ctx, []string{"a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimBatch(ctx, []string{"a", "b", "c"}, time.Minute)
	if err != nil {
		t.Fatalf("ClaimBatch after SCRIPT FLUSH: %v", err)
	}
	want := []dedup.State{dedup.InProgress, dedup.Claimed, dedup.Claimed}
	for i := range want {
		if got[i].State != want[i] {
			t.Errorf("claim %d = %v, want %v", i, got[i].State, want[i])
		}
	}
}
