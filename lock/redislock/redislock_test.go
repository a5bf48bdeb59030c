package redislock

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func TestMain(m *testing.M) {
	rwlocktest.Child(rwTarget)
	if os.Getenv(childEnvAddr) != "" {
		runChild() // never returns
	}
	os.Exit(m.Run())
}

// newClient returns a client of addr that t's cleanup closes.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newLocker returns a Locker on c that t's cleanup closes.
func newLocker(t testing.TB, c Client, opts ...Option) *Locker {
	t.Helper()
	l, err := New(c, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sharedRedis returns the address of the shared Redis, a key prefix of the
// test's own and an admin client; t's cleanup deletes the keys under the
// prefix.
func sharedRedis(t *testing.T) (addr, prefix string, admin *redis.Client) {
	t.Helper()
	addr = testsvc.RedisAddr(t)
	prefix = testsvc.KeyPrefix(t)
	admin = newClient(t, addr)
	t.Cleanup(func() { deletePrefix(t, admin, prefix) })
	return addr, prefix, admin
}

// deletePrefix deletes every key under prefix: what a restart without
// persistence does to this Locker's data.
func deletePrefix(t testing.TB, c *redis.Client, prefix string) {
	t.Helper()
	ctx := ctxT(t)
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			t.Errorf("DEL %s: %v", iter.Val(), err)
		}
	}
	if err := iter.Err(); err != nil {
		t.Errorf("SCAN: %v", err)
	}
}

// TestConformance runs locktest against the shared Redis. Its Restart drops
// every key of the test, as a restart without persistence would; the server
// process itself is restarted in TestConformancePrivate.
func TestConformance(t *testing.T) { runSharedConformance(t) }

// TestConformanceNoBatching runs locktest with every command sent on its
// own, against the shared Redis.
func TestConformanceNoBatching(t *testing.T) { runSharedConformance(t, WithBatching(false)) }

// runSharedConformance runs locktest against the shared Redis, with Lockers
// made with opts under the test's own prefix.
func runSharedConformance(t *testing.T, opts ...Option) {
	addr, prefix, admin := sharedRedis(t)
	var cuts locktest.Cuts
	locktest.Run(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			c := newClient(t, addr)
			l, err := New(c, append([]Option{WithPrefix(prefix)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return cuts.Add(l, func() { _ = c.Close() })
		},
		Cut:    cuts.Cut,
		Holder: func(t *testing.T, key string) string { return storedHolder(t, admin, prefix, key) },
		Revoke: func(t *testing.T, key string) {
			if err := admin.Del(ctxT(t), redisnode.LockKey(prefix, key)).Err(); err != nil {
				t.Errorf("revoke: %v", err)
			}
		},
		Restart: func(t *testing.T) { deletePrefix(t, admin, prefix) },
	})
}

// TestConformancePrivate runs locktest against a redis-server of its own,
// which Restart really restarts (empty: it keeps nothing on disk).
func TestConformancePrivate(t *testing.T) {
	srv := testsvc.StartRedis(t)
	admin := newClient(t, srv.Addr())
	locktest.Run(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, err := New(newClient(t, srv.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Revoke: func(t *testing.T, key string) {
			if err := admin.Del(ctxT(t), redisnode.LockKey(DefaultPrefix, key)).Err(); err != nil {
				t.Errorf("revoke: %v", err)
			}
		},
		Restart: func(t *testing.T) { srv.Restart() },
	})
}

// storedHolder reads the holder label stored with key's lock.
func storedHolder(t *testing.T, c *redis.Client, prefix, key string) string {
	t.Helper()
	owner, err := c.Get(ctxT(t), redisnode.LockKey(prefix, key)).Result()
	if err != nil {
		t.Fatalf("GET the lock: %v", err)
	}
	_, label, ok := lock.ParseOwner(owner)
	if !ok {
		t.Fatalf("the lock's value %q is not an owner", owner)
	}
	return label
}

func TestNewInvalid(t *testing.T) {
	t.Parallel()
	if _, err := New(nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	var nilClient *redis.Client
	if _, err := New(nilClient); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("New((*redis.Client)(nil)) = %v, want ErrInvalid", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, opt := range []Option{WithPrefix("a{b}:"), WithPrefix("}"), WithTokenRetention(time.Millisecond), WithSendsInFlight(0)} {
		if _, err := New(c, opt); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("New with a bad option = %v, want ErrInvalid", err)
		}
	}
}

// TestFairHandOff has waiters of one Locker contend for one key and checks
// that each gets its turn: with hand-off to the longest waiter, every
// goroutine's count stays close to the others'.
func TestFairHandOff(t *testing.T) {
	t.Parallel()
	addr := testsvc.RedisAddr(t)
	l := newLocker(t, newClient(t, addr), WithPrefix(testsvc.KeyPrefix(t)))
	const workers, rounds = 6, 15
	var (
		turns turnLog
		wg    sync.WaitGroup
	)
	for g := range workers {
		wg.Go(func() {
			for range rounds {
				if !turns.take(t, l, g) {
					return
				}
			}
		})
	}
	wg.Wait()
	checkNoBarging(t, turns.order, workers, rounds)
}

// turnLog records who took a key in turn, checking that turns never
// overlap and that tokens rise.
type turnLog struct {
	mu     sync.Mutex
	order  []int  // goroutines in the order they took the key; guarded by mu
	last   uint64 // guarded by mu
	inside bool   // guarded by mu
}

// take has goroutine g take "k" through l, records its turn and releases
// the key. It reports false, having failed t, if either call failed.
func (tl *turnLog) take(t *testing.T, l *Locker, g int) bool {
	lease, err := l.Acquire(ctxT(t), "k", lock.WithTTL(5*time.Second))
	if err != nil {
		t.Error(err)
		return false
	}
	tl.mu.Lock()
	if tl.inside || lease.Token() <= tl.last {
		t.Errorf("overlap or token not rising: %d after %d", lease.Token(), tl.last)
	}
	tl.inside, tl.last = true, lease.Token()
	tl.order = append(tl.order, g)
	tl.inside = false
	tl.mu.Unlock()
	if err := lease.Release(ctxT(t)); err != nil {
		t.Error(err)
		return false
	}
	return true
}

// checkNoBarging fails t if, once all workers have queued, a goroutine
// took the lock twice while another that was waiting got nothing: in every
// window of workers consecutive acquisitions after the start, each
// goroutine appears at most twice. Only windows before the first goroutine
// finished its rounds count: after that, fewer goroutines share the key.
func checkNoBarging(t *testing.T, order []int, workers, rounds int) {
	t.Helper()
	end, seen := len(order), map[int]int{}
	for i, g := range order {
		if seen[g]++; seen[g] == rounds && i < end {
			end = i
		}
	}
	for i := workers; i+workers <= end; i++ {
		count := map[int]int{}
		for _, g := range order[i : i+workers] {
			count[g]++
			if count[g] > 2 {
				t.Fatalf("goroutine %d barged: acquisitions %d..%d were %v", g, i, i+workers, order[i:i+workers])
			}
		}
	}
}

// TestNoStarvationAcrossLockers: a waiter of one Locker gets its turns
// while the goroutines of another Locker, on another client, take turns on
// the key as fast as they can. A Locker hands a release to its own waiter
// directly at most every other time while another Locker's waiter marked
// the key, and the other releases reach every Locker's waiter alike, so
// the lone waiter is passed over a few times, not for ever. (Were every
// release handed to the busy Locker's next waiter, the lone one would get
// the key only when its attempt fell between a release and that waiter's
// attempt, a few times in a hundred while the busy ones hold it for 3 ms.)
func TestNoStarvationAcrossLockers(t *testing.T) {
	t.Parallel()
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	busy := newLocker(t, newClient(t, addr), WithPrefix(prefix))
	lone := newLocker(t, newClient(t, addr), WithPrefix(prefix))
	var (
		busyTurns atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lease, err := busy.Acquire(ctxT(t), "k", lock.WithTTL(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				busyTurns.Add(1)
				time.Sleep(3 * time.Millisecond) // most of the time the key is held
				_ = lease.Release(ctxT(t))
			}
		}()
	}
	for busyTurns.Load() < 20 { // the busy Locker's waiters are queued
		time.Sleep(time.Millisecond)
	}
	// Each public release goes to either Locker's waiter with even odds:
	// being passed over 40 times in a row has odds under 2^-20.
	const rounds, maxPassedOver = 10, 40
	worst := int64(0)
	for range rounds {
		before := busyTurns.Load()
		lease, err := lone.Acquire(ctxT(t), "k", lock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, busyTurns.Load()-before)
		_ = lease.Release(ctxT(t))
	}
	close(stop)
	wg.Wait()
	if worst > maxPassedOver {
		t.Fatalf("the lone Locker's waiter was passed over %d times in a row, want at most %d", worst, maxPassedOver)
	}
	t.Logf("passed over at most %d times; the busy Locker took %d turns", worst, busyTurns.Load())
}
