package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// The assertions below are about how the Manager turns what happens to a
// lease into events and how the collector counts them; both sit above the
// backend, which emits nothing itself. memlock therefore drives them as well
// as a server would, fast and without timing noise; TestLockRedisRenewalRefused
// adds the one event a real server makes happen for real: a lock deleted
// behind its holder's back.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 5 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// histCount returns the sample count and sum of the histogram series with
// the given label values.
func histCount(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

func lint(t *testing.T, c prometheus.Collector) {
	t.Helper()
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestLockMetrics(t *testing.T) {
	m, reg := registered(t, NewLock)
	l := memlock.New()
	l.SetObserver(m.Observer("mem"))
	ctx := ctxT(t)
	held := m.held.WithLabelValues("mem")

	// 1.5 s: a renewal has a second to be answered on a loaded machine (a
	// 300 ms lease left 200 ms, and a lost lease fails the Release below).
	a, err := l.Acquire(ctx, "a", lock.WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(held); got != 1 {
		t.Fatalf("leases_held = %v after one Acquire, want 1", got)
	}
	if _, err := l.Acquire(ctx, "a", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Acquire: %v, want ErrNotAcquired", err)
	}
	if _, err := l.Acquire(ctx, ""); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Acquire with an empty key: %v, want ErrInvalid", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}

	// A 1.5 s lease is renewed every 500 ms: wait for two renewals.
	eventually(t, "two renewals", func() bool { return testutil.ToFloat64(m.renew.WithLabelValues("mem", "ok")) >= 2 })

	// A waiter blocks until a is released; its wait is recorded.
	got := make(chan *lock.Lease, 1)
	go func() {
		b, err := l.Acquire(ctx, "a", lock.WithFixedTTL(), lock.WithTTL(50*time.Millisecond))
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	// The waiter has found a held once it is queued; a then stays held
	// 30 ms longer. (A bare 30 ms sleep let a waiter that started late find
	// the key free and wait for nothing.)
	eventually(t, "the waiter to queue", func() bool { return l.Waiting("a") == 1 })
	time.Sleep(30 * time.Millisecond)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.FailNow()
	}
	// b has a fixed 50 ms TTL and is never released: it is lost as expired.
	<-b.Done()
	eventually(t, "the loss to be counted", func() bool {
		return testutil.ToFloat64(m.lost.WithLabelValues("mem", string(lock.LossExpired))) == 1
	})

	if got := testutil.ToFloat64(held); got != 0 {
		t.Errorf("leases_held = %v after release and loss, want 0", got)
	}
	if got := testutil.ToFloat64(m.release.WithLabelValues("mem", "ok")); got != 1 {
		t.Errorf("releases_total{ok} = %v, want 1", got)
	}
	for outcome, want := range map[string]uint64{"acquired": 2, "not_acquired": 1, "invalid": 1, "canceled": 1, "error": 0} {
		if n, _ := histCount(t, reg, "latchkey_lock_acquire_duration_seconds", map[string]string{"backend": "mem", "outcome": outcome}); n != want {
			t.Errorf("acquire_duration_seconds{outcome=%q} count = %d, want %d", outcome, n, want)
		}
	}
	// Of the two acquisitions only the waiter waited, for at least the 30 ms
	// a was still held after it started.
	if n, sum := histCount(t, reg, "latchkey_lock_acquire_wait_seconds", map[string]string{"backend": "mem", "outcome": "acquired"}); n != 2 || sum < 0.025 {
		t.Errorf("acquire_wait_seconds{acquired}: count %d sum %.3fs, want 2 and >= 0.025s", n, sum)
	}
	lint(t, m)
}

// TestLockRedisRenewalRefused deletes a held lock in Redis behind its
// holder's back: the next renewal is refused, and the collector counts the
// refusal and the loss and drops the lease from the held gauge.
func TestLockRedisRenewalRefused(t *testing.T) {
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, err := c.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		_ = c.Close()
	})
	l, err := redislock.New(c, redislock.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	m, _ := registered(t, NewLock)
	l.SetObserver(m.Observer("redis"))
	ctx := ctxT(t)

	// Renewed every 500 ms: long enough that a loaded machine confirms each
	// renewal in time, so the loss can only come from the deletion.
	lease, err := l.Acquire(ctx, "account-1", lock.WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.held.WithLabelValues("redis")); got != 1 {
		t.Fatalf("leases_held = %v, want 1", got)
	}
	n, err := c.Del(ctx, prefix+"{account-1}").Result()
	if err != nil || n != 1 {
		t.Fatalf("DEL of the lock key: %d, %v (key layout changed?)", n, err)
	}
	select {
	case <-lease.Done():
	case <-ctx.Done():
		t.Fatal("the lease was never reported lost")
	}
	if !errors.Is(lease.Err(), lock.ErrLeaseLost) {
		t.Fatalf("lease.Err() = %v", lease.Err())
	}
	eventually(t, "the loss to be counted", func() bool {
		return testutil.ToFloat64(m.lost.WithLabelValues("redis", string(lock.LossRefused))) == 1
	})
	if got := testutil.ToFloat64(m.renew.WithLabelValues("redis", "refused")); got != 1 {
		t.Errorf("renewals_total{refused} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.held.WithLabelValues("redis")); got != 0 {
		t.Errorf("leases_held = %v after the loss, want 0", got)
	}
	// Release after a loss is no release: the gauge must not go negative.
	if err := lease.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after loss: %v, want ErrNotHeld", err)
	}
	if got := testutil.ToFloat64(m.held.WithLabelValues("redis")); got != 0 {
		t.Errorf("leases_held = %v after Release of a lost lease, want 0", got)
	}
	lint(t, m)
}

// TestLogObserverOmitsKeys checks that lock.LogObserver keeps keys out of
// the log unless asked, and reports a loss at Warn.
func TestLogObserverOmitsKeys(t *testing.T) {
	for _, logKeys := range []bool{false, true} {
		var buf strings.Builder
		o := lock.LogObserver(newTextLogger(&buf), logKeys)
		o(lock.Event{Kind: lock.EventLoss, Key: "acct-42", Err: lock.ErrLeaseLost, Reason: lock.LossRefused})
		out := buf.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "reason=renewal_refused") {
			t.Errorf("loss record: %q", out)
		}
		if strings.Contains(out, "acct-42") != logKeys {
			t.Errorf("logKeys=%v, record %q", logKeys, out)
		}
	}
}
