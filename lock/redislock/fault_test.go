package redislock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// faultTTL is the lease of the fault tests: long enough that the holder's
// drift margin (TTL/100 + 2 ms) dwarfs timer latency on a loaded machine.
const faultTTL = time.Second

func waitDone(t *testing.T, lease *lock.Lease, within time.Duration) {
	t.Helper()
	suitekit.WaitDone(t, lease, within)
	if !errors.Is(lease.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
}

// takeOver acquires key on l, waiting, and checks that lost's Done was already
// closed when it got in: the old holder always learns first.
func takeOver(t *testing.T, l *Locker, key string, lost *lock.Lease) *lock.Lease {
	t.Helper()
	next, err := l.Acquire(ctxT(t), key, lock.WithTTL(faultTTL), lock.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("successor's Acquire: %v", err)
	}
	select {
	case <-lost.Done():
	default:
		t.Fatal("another holder got the lock before the old holder's Done closed")
	}
	if next.Token() <= lost.Token() {
		t.Fatalf("successor's token %d <= old holder's %d", next.Token(), lost.Token())
	}
	return next
}

func TestRedisRestartMidLease(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	l := newLocker(t, newClient(t, srv.Addr()))
	held, err := l.Acquire(ctxT(t), "k", lock.WithTTL(faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	waitDone(t, held, 10*time.Second)
	if err := held.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after loss = %v, want ErrNotHeld", err)
	}
	// The counter is gone with the data; tokens still rise.
	next, err := l.Acquire(ctxT(t), "k", lock.WithTTL(faultTTL), lock.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token after restart %d <= before %d", next.Token(), held.Token())
	}
	_ = next.Release(ctxT(t))
}

func TestFlushAllBehindHoldersBack(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	c := newClient(t, srv.Addr())
	l := newLocker(t, c)
	held, err := l.Acquire(ctxT(t), "k", lock.WithTTL(faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FlushAll(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, held, 5*time.Second)
	next, err := l.Acquire(ctxT(t), "k", lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token after FLUSHALL %d <= before %d", next.Token(), held.Token())
	}
	_ = next.Release(ctxT(t))
}

// TestNetworkFaults cuts, slows and blackholes the holder's link to Redis
// (through a proxy) and checks that the holder's Done closes before another
// holder, on a healthy link, gets the lock.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name        string
		hurt, mercy func(p *testsvc.Proxy)
	}{
		{"Cut", func(p *testsvc.Proxy) { p.Cut() }, func(p *testsvc.Proxy) { p.Restore() }},
		// Replies take longer than the lease: every renewal is confirmed
		// too late, though the server applies it.
		{"Slow", func(p *testsvc.Proxy) { p.SetLatency(faultTTL / 2) }, func(p *testsvc.Proxy) { p.SetLatency(0) }},
		{"Blackhole", func(p *testsvc.Proxy) { p.Blackhole(true) }, func(p *testsvc.Proxy) { p.Blackhole(false) }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := testsvc.StartRedis(t)
			p := testsvc.NewProxy(t, srv.Addr())
			holder := newLocker(t, newClient(t, p.Addr()))
			other := newLocker(t, newClient(t, srv.Addr()))
			held, err := holder.Acquire(ctxT(t), "k", lock.WithTTL(faultTTL))
			if err != nil {
				t.Fatal(err)
			}
			f.hurt(p)
			next := takeOver(t, other, "k", held)
			waitDone(t, held, time.Second)
			f.mercy(p)
			if err := held.Release(ctxT(t)); !errors.Is(err, lock.ErrNotHeld) {
				t.Errorf("old holder's Release = %v, want ErrNotHeld", err)
			}
			// The old holder's stale release must not have freed the lock.
			if _, err := holder.Acquire(ctxT(t), "k", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
				t.Errorf("after the old holder's Release the key was free: %v", err)
			}
			if err := next.Release(ctxT(t)); err != nil {
				t.Error(err)
			}
		})
	}
}

// Environment of the child process of TestPausedHolder.
const (
	childEnvAddr = "REDISLOCK_TEST_CHILD_ADDR"
	childEnvTTL  = "REDISLOCK_TEST_CHILD_TTL"
)

// runChild is the test binary re-executed as a lock holder: it takes "k",
// prints its token, and reports on stdout when it learns the lease is lost.
func runChild() {
	ttl, _ := time.ParseDuration(os.Getenv(childEnvTTL))
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(childEnvAddr)})
	l, err := New(c)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	lease, err := l.Acquire(context.Background(), "k", lock.WithTTL(ttl))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("token", lease.Token())
	<-lease.Done()
	fmt.Println("lost", lease.Err())
	select {} // hold on until killed
}

// TestPausedHolder stops a holder process (SIGSTOP) past its TTL: another
// holder gets in with a higher token, and the paused one, resumed, is told
// its lease is lost.
func TestPausedHolder(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	child := suitekit.StartChild(t, childEnvAddr+"="+srv.Addr(), childEnvTTL+"="+faultTTL.String())
	first := child.Expect(t, "token ", 20*time.Second, nil)
	tok, err := strconv.ParseUint(first, 10, 64)
	if err != nil {
		t.Fatalf("child: token %q", first)
	}
	if err := child.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, newClient(t, srv.Addr()))
	next, err := l.Acquire(ctxT(t), "k", lock.WithTTL(faultTTL), lock.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("Acquire while the holder is paused: %v", err)
	}
	if next.Token() <= tok {
		t.Fatalf("successor's token %d <= paused holder's %d", next.Token(), tok)
	}
	if err := child.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if s := child.Expect(t, "lost ", 20*time.Second, nil); !strings.Contains(s, lock.ErrLeaseLost.Error()) {
		t.Fatalf("resumed child said lost %q, want its lease lost", s)
	}
	// The resumed holder's renewal or cleanup must not touch the new lock.
	time.Sleep(faultTTL / 2)
	select {
	case <-next.Done():
		t.Fatalf("successor lost its lease: %v", next.Err())
	default:
	}
	if err := next.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireNeverReturnsAnExpiredLease: when the answer to an acquisition
// arrives after the lease's local deadline (a link so slow that the round
// trip outlasts the TTL; an etcd cluster electing a leader behaves the same),
// the lock may already have passed on. Acquire must not hand out that lease,
// already past its deadline: it gives the lock back and reports it not
// acquired, or, when it may wait, tries again.
func TestAcquireNeverReturnsAnExpiredLease(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	proxy := testsvc.NewProxy(t, srv.Addr())
	l := newLocker(t, newClient(t, proxy.Addr()))
	admin := newClient(t, srv.Addr())
	if err := admin.Ping(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(700 * time.Millisecond) // a round trip of 1.4 s, over the 1 s TTL
	lease, err := l.Acquire(ctxT(t), "slow", lock.WithTTL(faultTTL), lock.WithWait(0))
	if err == nil {
		select {
		case <-lease.Done():
			t.Fatalf("Acquire returned a lease already lost (%v), past its deadline %v", lease.Err(), lease.Deadline())
		default:
			t.Fatalf("Acquire returned a lease at %v, past its deadline %v", time.Now(), lease.Deadline())
		}
	}
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Acquire over a link slower than the TTL: %v, want ErrNotAcquired", err)
	}
	proxy.SetLatency(0)
	// It gave the lock back (or it expired): the key is free again.
	lease, err = l.Acquire(ctxT(t), "slow", lock.WithTTL(faultTTL), lock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire once the link is fast again: %v", err)
	}
	if err := lease.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
