package redisbatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisbatch"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

var push = redis.NewScript(`return redis.call('RPUSH', KEYS[1], ARGV[1])`)

func newClient(t *testing.T) (*redis.Client, string) { return testsvc.RedisClient(t) }

// slots is the fixed number of sends in flight the tests use besides one,
// and sendsInFlight the Batchers each test runs with: one send, slots sends
// and, as 0, the adaptive limit of New.
const slots = 8

var sendsInFlight = []int{1, slots, 0}

// newBatcher returns a Batcher on c with sends sends in flight, or New's
// adaptive limit for 0.
func newBatcher(c *redis.Client, sends int) *redisbatch.Batcher {
	if sends == 0 {
		return redisbatch.New(c)
	}
	return redisbatch.NewSends(c, sends)
}

// forEachSends runs test in parallel, in a parallel subtest for each of
// sendsInFlight.
func forEachSends(t *testing.T, test func(t *testing.T, sends int)) {
	t.Parallel()
	for _, sends := range sendsInFlight {
		name := fmt.Sprint(sends, " sends")
		if sends == 0 {
			name = "adaptive"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, sends)
		})
	}
}

// TestConcurrentCallsGetTheirOwnReplies runs many goroutines' calls through
// one Batcher, so most travel in pipelines, and checks every reply and that
// each goroutine's calls ran in order.
func TestConcurrentCallsGetTheirOwnReplies(t *testing.T) { forEachSends(t, concurrentCalls) }

// concurrentCalls is TestConcurrentCallsGetTheirOwnReplies with sends sends
// in flight.
func concurrentCalls(t *testing.T, sends int) {
	c, prefix := newClient(t)
	b := newBatcher(c, sends)
	ctx := context.Background()
	const goroutines, calls = 64, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%sg%d", prefix, g%8) // 8 goroutines share each key
			own := fmt.Sprintf("%sown%d", prefix, g)
			for i := range calls {
				if _, err := b.Run(ctx, nil, push, []string{key}, fmt.Sprint(g, ":", i)).Int64(); err != nil {
					t.Error(err)
					return
				}
				n, err := b.Run(ctx, nil, push, []string{own}, i).Int64()
				if err != nil || n != int64(i+1) {
					t.Errorf("push %d on %s: reply %d, %v", i, own, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for g := range 8 {
		got, err := c.LRange(ctx, fmt.Sprintf("%sg%d", prefix, g), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		next := map[string]int{}
		for _, v := range got {
			var gi, i int
			_, _ = fmt.Sscanf(v, "%d:%d", &gi, &i)
			if i != next[fmt.Sprint(gi)] {
				t.Fatalf("key g%d: goroutine %d's call %d ran out of order: %v", g, gi, i, got)
			}
			next[fmt.Sprint(gi)]++
		}
		if len(got) != goroutines/8*calls {
			t.Errorf("key g%d: %d calls ran, want %d", g, len(got), goroutines/8*calls)
		}
	}
}

// TestOrderedCallback checks the ordering promise: a call on the same key made
// after another call's ordered callback ran reaches Redis after it, even when
// the first call waits in the queue.
func TestOrderedCallback(t *testing.T) { forEachSends(t, orderedCallback) }

// orderedCallback is TestOrderedCallback with sends sends in flight.
func orderedCallback(t *testing.T, sends int) {
	c, prefix := newClient(t)
	b := newBatcher(c, sends)
	ctx := context.Background()
	stop := make(chan struct{})
	var load sync.WaitGroup
	for g := range 2 * slots {
		load.Add(1)
		go func() { // keep every send slot busy so calls queue
			defer load.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b.Run(ctx, nil, push, []string{fmt.Sprintf("%sload%d", prefix, g)}, 1)
			}
		}()
	}
	for i := range 200 {
		key := fmt.Sprintf("%sk%d", prefix, i)
		ordered := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- b.Run(ctx, func() { close(ordered) }, push, []string{key}, "first").Err()
		}()
		<-ordered
		if err := b.Run(ctx, nil, push, []string{key}, "second").Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got, err := c.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{"first", "second"}) {
			t.Fatalf("round %d: %v, want [first second]", i, got)
		}
	}
	close(stop)
	load.Wait()
}

// TestUnloadedScriptInPipeline checks the NOSCRIPT fallback: calls of a script
// the server has never seen, sent in one pipeline, still all run.
func TestUnloadedScriptInPipeline(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t)
	b := redisbatch.New(c)
	s := redis.NewScript(fmt.Sprintf("-- %s %d\nreturn redis.call('INCR', KEYS[1])", prefix, time.Now().UnixNano()))
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Run(context.Background(), nil, s, []string{prefix + "n"}).Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, err := c.Get(context.Background(), prefix+"n").Int(); err != nil || n != 32 {
		t.Errorf("counter %d, %v; want 32", n, err)
	}
}

// TestCancelledWhileQueued checks that a call whose context ends while it
// waits returns the context's error at once.
func TestCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t)
	b := redisbatch.NewSends(c, slots)
	slow := redis.NewScript(`local t = redis.call('TIME') local s = tonumber(t[1]) * 1e6 + tonumber(t[2])
repeat local u = redis.call('TIME') until tonumber(u[1]) * 1e6 + tonumber(u[2]) > s + 20000
return 1`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lastSlow time.Time // when the last slow call returned
	for g := range slots {
		wg.Add(1)
		go func() { // occupy every send slot for about 20 ms each
			defer wg.Done()
			b.Run(context.Background(), nil, slow, []string{fmt.Sprintf("%sslow%d", prefix, g)})
			mu.Lock()
			lastSlow = time.Now()
			mu.Unlock()
		}()
	}
	for wait := time.Now(); redisbatch.Sending(b) < slots; time.Sleep(50 * time.Microsecond) {
		if time.Since(wait) > 10*time.Second {
			t.Fatalf("the slow calls took %d of %d send slots", redisbatch.Sending(b), slots)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := b.Run(ctx, nil, push, []string{prefix + "q"}, 1).Err()
	returned := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want context.DeadlineExceeded", err)
	}
	wg.Wait()
	// Waiting for a slot and then for its reply would have ended after the
	// slow calls, which hold Redis one after another for about 160 ms.
	if !returned.Before(lastSlow) {
		t.Errorf("returned %v after the last slow call, not at its deadline", returned.Sub(lastSlow))
	}
}

// TestPlainCommands runs plain commands through one Batcher, mixed with
// script calls so that both travel in the same pipelines, and checks every
// reply and the order of each key's commands.
func TestPlainCommands(t *testing.T) {
	forEachSends(t, func(t *testing.T, sends int) {
		c, prefix := newClient(t)
		b := newBatcher(c, sends)
		ctx := context.Background()
		const goroutines, calls = 32, 50
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counter := fmt.Sprintf("%sctr%d", prefix, g)
				list := fmt.Sprintf("%slist%d", prefix, g)
				for i := range calls {
					n, err := b.Do(ctx, counter, "incr", counter).Int64()
					if err != nil || n != int64(i+1) {
						t.Errorf("incr %d on %s: reply %d, %v", i, counter, n, err)
						return
					}
					if _, err := b.Run(ctx, nil, push, []string{list}, i).Int64(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if _, err := b.Do(ctx, prefix+"missing", "get", prefix+"missing").Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET of a missing key = %v, want redis.Nil", err)
		}
	})
}
