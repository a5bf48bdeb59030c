package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// An uncontended acquire and release pair costs Redis seven commands, those
// inside the scripts included (see the package doc), and publishes nothing:
// the check that no read-write lock or semaphore holds the name is the SET
// NX that takes it.
func TestCommandsPerPair(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := newClient(t, srv.Addr())
	l := newLocker(t, c)
	pair := func() {
		lease, err := l.Acquire(ctxT(t), "k", lock.WithWait(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	pair() // loads the scripts, starts the counter
	if err := c.ConfigResetStat(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	const pairs = 20
	for range pairs {
		pair()
	}
	cost, err := testsvc.RedisServerCost(ctxT(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(cost.Calls-1) / pairs; per > 7 { // less CONFIG RESETSTAT
		t.Errorf("%.2f commands per pair, want at most 7", per)
	}
	if n := commandCalls(t, c, "publish"); n != 0 {
		t.Errorf("%d PUBLISH for uncontended pairs, want none", n)
	}
}

// A release deletes the waiters mark with the lock: it publishes once for
// the waiters of that moment, and again only after someone has failed to
// get the lock since.
func TestWaitersMarkRearms(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := newClient(t, srv.Addr())
	holder, waiter := newLocker(t, c), newLocker(t, newClient(t, srv.Addr()))
	hold := func() *lock.Lease {
		lease, err := holder.Acquire(ctxT(t), "k", lock.WithTTL(10*time.Second), lock.WithWait(0))
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	fail := func() {
		if _, err := waiter.Acquire(ctxT(t), "k", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("attempt on a held lock: %v, want ErrNotAcquired", err)
		}
	}
	lease := hold()
	fail()
	_ = lease.Release(ctxT(t)) // published: someone waited
	lease = hold()
	_ = lease.Release(ctxT(t)) // nobody failed since: nothing to publish
	lease = hold()
	fail()
	_ = lease.Release(ctxT(t)) // published
	if n := commandCalls(t, c, "publish"); n != 2 {
		t.Errorf("%d PUBLISH for 3 releases of which 2 followed a failed attempt, want 2", n)
	}
}

// Tokens rise across the fencing counter's expiry, which comes a retention
// after the counter started, however busy the key: it restarts from the
// server's clock, above every token it issued.
func TestTokensRiseAcrossCounterExpiry(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	l := newLocker(t, newClient(t, srv.Addr()), WithTokenRetention(time.Second))
	var last uint64
	restarts := 0
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); {
		lease, err := l.Acquire(ctxT(t), "k", lock.WithWait(0))
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token() <= last {
			t.Fatalf("token %d after %d", lease.Token(), last)
		}
		if lease.Token() > last+1 {
			restarts++
		}
		last = lease.Token()
		_ = lease.Release(ctxT(t))
		time.Sleep(20 * time.Millisecond)
	}
	if restarts < 2 { // the first acquisition and at least one expiry
		t.Errorf("the counter restarted %d times in 2.5 s at 1 s retention, want at least 2", restarts)
	}
}

// commandCalls is the number of calls of one command since the last CONFIG
// RESETSTAT (or the server's start), those inside scripts included.
func commandCalls(t *testing.T, c interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}, name string) int64 {
	t.Helper()
	s, err := c.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		return n
	}
	return 0
}

// A waiter of another Locker than the holder's marks the key, so its
// release publishes. A waiter behind a holder of its own Locker does not:
// that Locker wakes it when it releases, and nothing is published for it.
// (The mark used to be set again by every acquisition with waiters of its
// Locker behind it, and every later release published, slowing every
// hand-off among one Locker's goroutines to the pace of pub/sub while any
// other Locker was subscribed.)
func TestWaitersMarkOnlyForAnotherLocker(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := newClient(t, srv.Addr())
	holder, waiters := newLocker(t, c), newLocker(t, newClient(t, srv.Addr()))
	held, err := holder.Acquire(ctxT(t), "k", lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	leases := make(chan *lock.Lease, 2)
	for range 2 {
		go func() {
			lease, err := waiters.Acquire(ctxT(t), "k")
			if err != nil {
				t.Error(err)
				lease = nil
			}
			leases <- lease
		}()
	}
	// Both have found the lock held (each failed attempt reads the
	// holder's PTTL) before it is released.
	for commandCalls(t, c, "pttl") < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = held.Release(ctxT(t))
	first := <-leases
	if first == nil {
		t.FailNow()
	}
	lk, _ := waiters.n.Keys("k")
	if n := c.Exists(ctxT(t), lk+":waiters").Val(); n != 0 {
		t.Errorf("waiters mark after a waiter took the lock with only its own Locker's waiter behind it: %d keys, want 0", n)
	}
	_ = first.Release(ctxT(t))
	if second := <-leases; second != nil {
		_ = second.Release(ctxT(t))
	}
	if n := commandCalls(t, c, "publish"); n != 1 {
		t.Errorf("%d PUBLISH, want 1: for the other Locker's release only", n)
	}
}

// A release with a waiter of its own Locker behind it takes the lock for
// the waiter in the release script: six commands (the script call, GET,
// EXISTS, SET PX, and TIME and SET GET for the token), no attempt of the
// waiter's and no PUBLISH, and the waiter's token is above the first's.
func TestHandOverInTheReleaseScript(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := newClient(t, srv.Addr())
	l := newLocker(t, c)
	// handOver holds key, queues a waiter, calls between() and releases
	// to the waiter; it returns both leases.
	handOver := func(key string, between func()) (first, second *lock.Lease) {
		first, err := l.Acquire(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *lock.Lease, 1)
		go func() {
			lease, err := l.Acquire(ctxT(t), key)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		for l.Waiting(key) == 0 {
			time.Sleep(time.Millisecond)
		}
		between()
		if err := first.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		second = <-got
		if second == nil {
			t.FailNow()
		}
		return first, second
	}
	_, warm := handOver("warm", func() {}) // loads the script
	_ = warm.Release(ctxT(t))
	first, second := handOver("k", func() {
		if err := c.ConfigResetStat(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
	})
	cost, err := testsvc.RedisServerCost(ctxT(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if n := cost.Calls - 1; n != 6 { // less CONFIG RESETSTAT
		t.Errorf("%d commands for the hand-over, want 6", n)
	}
	if n := commandCalls(t, c, "publish"); n != 0 {
		t.Errorf("%d PUBLISH for a hand-over within one Locker, want none", n)
	}
	if second.Token() <= first.Token() {
		t.Errorf("the waiter's token %d, not above the first holder's %d", second.Token(), first.Token())
	}
	lk, _ := l.n.Keys("k")
	if err := second.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctxT(t), lk).Val(); n != 0 {
		t.Errorf("the handed-over lock outlived its release: %d keys", n)
	}
}
